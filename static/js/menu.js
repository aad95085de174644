// The header's menu button: on narrow screens (CSS shows the button there) the links fold behind it.
// A real <button aria-expanded> so Enter and Space work; Escape closes the menu and returns focus to it.
// Without this script the button stays hidden and the links simply wrap (the CSP allows no inline script).
(function () {
  "use strict";
  var button = document.getElementById("menu-toggle");
  var menu = document.getElementById("site-menu");
  if (!button || !menu) return;
  var bar = button.closest(".topbar");
  if (bar) bar.classList.add("has-menu");
  button.hidden = false;

  function setOpen(open) {
    button.setAttribute("aria-expanded", open ? "true" : "false");
    menu.classList.toggle("open", open);
  }
  function isOpen() { return button.getAttribute("aria-expanded") === "true"; }

  button.addEventListener("click", function () { setOpen(!isOpen()); });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && isOpen()) {
      setOpen(false);
      button.focus();
    }
  });
  // A tap outside the open menu closes it, as people expect from a phone menu.
  document.addEventListener("click", function (event) {
    if (isOpen() && !menu.contains(event.target) && !button.contains(event.target)) setOpen(false);
  });
})();
