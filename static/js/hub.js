// Tiiny Hub page glue: socket status banner and the "still watching" heartbeat.
// Everything live arrives as whole elements swapped by id (htmx ws extension); this file holds no state
// that the server doesn't also have.
(function () {
  "use strict";
  var HEARTBEAT_MS = 30000;
  var socket = null;
  var timer = null;

  function banner(show) {
    var el = document.getElementById("banner-socket");
    if (el) el.hidden = !show;
  }

  document.addEventListener("htmx:wsOpen", function (evt) {
    socket = evt.detail.socketWrapper;
    document.body.dataset.live = "open";
    banner(false);
    if (timer) clearInterval(timer);
    timer = setInterval(function () {
      if (socket) socket.send(JSON.stringify({ watching: true }));
    }, HEARTBEAT_MS);
  });

  document.addEventListener("htmx:wsClose", function () {
    document.body.dataset.live = "closed";
    banner(true);
    if (timer) clearInterval(timer);
    timer = null;
    socket = null;
  });

  // Destructive buttons carry data-confirm="…": ask before the request goes out.
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) evt.preventDefault();
  }, true);
})();
