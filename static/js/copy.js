// "Copy" buttons: <button data-copy="#field-id"> copies that field's text and says so in the button for a
// moment. Where the Clipboard API is unavailable (plain http on a LAN address is not a "secure context") the
// field's text is selected instead, so Ctrl+C / a long press finishes the job.
document.addEventListener("click", (event) => {
  const button = event.target instanceof Element ? event.target.closest("button[data-copy]") : null;
  if (!button) return;
  event.preventDefault();
  const field = document.querySelector(button.getAttribute("data-copy"));
  if (!field) return;
  const label = button.getAttribute("data-label") || button.textContent;
  button.setAttribute("data-label", label);
  const done = (text) => {
    button.textContent = text;
    setTimeout(() => { button.textContent = label; }, 2000);
  };
  field.focus();
  field.select();
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(field.value).then(() => done("Copied"), () => done("Selected: press Ctrl+C"));
  } else {
    done("Selected: press Ctrl+C");
  }
});
