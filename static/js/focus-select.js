// Read-only fields showing something to copy (a share link, a new token, a generated password) select
// their whole text on focus. This replaces inline onfocus="this.select()": the Content-Security-Policy
// allows scripts from our own files only.
document.addEventListener("focusin", (event) => {
  const field = event.target;
  if (field instanceof HTMLInputElement && field.hasAttribute("data-select-on-focus")) field.select();
});
