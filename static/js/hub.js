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

  // A form that comes back invalid answers 400 (or 422) with the form and its messages, a summary asked for too
  // often 429 saying when it comes back. htmx swaps no 4xx by default, so the person would see nothing happen:
  // swap those (HTML only; a bare 4xx text is left alone).
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail.xhr;
    var type = (xhr && xhr.getResponseHeader("Content-Type")) || "";
    var shown = xhr.status === 400 || xhr.status === 422 || xhr.status === 429;
    if (shown && type.indexOf("text/html") === 0 && xhr.responseText) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });

  // An element marked data-ask-again (the new-job form's summary) that was answered 429 asks again, once, when
  // Retry-After has passed: else the summary would say "paused" until the person changed something.
  document.addEventListener("htmx:afterRequest", function (evt) {
    var xhr = evt.detail.xhr;
    var elt = evt.detail.elt;
    if (!xhr || xhr.status !== 429 || !elt || !elt.hasAttribute || !elt.hasAttribute("data-ask-again")) return;
    var wait = parseInt(xhr.getResponseHeader("Retry-After"), 10) || 1;
    clearTimeout(elt.hubAskAgain);
    elt.hubAskAgain = setTimeout(function () { window.htmx.trigger(elt, "ask-again"); }, wait * 1000);
  });

  // Destructive buttons carry data-confirm="…": ask before the request goes out.
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) evt.preventDefault();
  }, true);

  // Forms that arrived by push (cancel, retry) were rendered without a request, so without its CSRF token:
  // a plain POST takes the page's token (htmx requests send it as a header already).
  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (e) { return ""; }
  }
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    if (!form.querySelector || (form.getAttribute("method") || "").toLowerCase() !== "post") return;
    if (form.querySelector("[name=csrfmiddlewaretoken]")) return;
    var token = csrfToken();
    if (!token) return;
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = "csrfmiddlewaretoken";
    input.value = token;
    form.appendChild(input);
  }, true);

  // A player (video, audio, 3D viewer, result image) is never replaced by a push: it would lose its place,
  // its controls and the browser's buffer. The server sends it once (the move to done); this is the backstop.
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    var target = evt.detail && evt.detail.target;
    if (target && target.querySelector && (target.hasAttribute("data-player") || target.querySelector("[data-player]"))) {
      evt.preventDefault();
    }
  });

  // A push may replace a box someone is using (the actions box, open, with a reason half typed): what they
  // opened, typed and focused survives the swap. Kept by position (details) and by id (fields), per target.
  var using = {};
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    var target = evt.detail && evt.detail.target;
    if (!target || !target.id || !target.querySelectorAll || evt.defaultPrevented) return;
    var active = document.activeElement;
    var state = { open: [], values: {}, focus: target.contains(active) && active.id ? active.id : "" };
    target.querySelectorAll("details").forEach(function (d, i) { if (d.open) state.open.push(i); });
    target.querySelectorAll("input[id], textarea[id], select[id]").forEach(function (f) {
      if (f.type === "hidden" || f.type === "file") return;
      var changed = f.type === "checkbox" || f.type === "radio" ? f.checked !== f.defaultChecked
        : f.tagName === "SELECT" ? Array.prototype.some.call(f.options, function (o) { return o.selected !== o.defaultSelected; })
        : f.value !== f.defaultValue;
      if (changed) state.values[f.id] = f.type === "checkbox" || f.type === "radio" ? f.checked : f.value;
    });
    if (state.open.length || state.focus || Object.keys(state.values).length) using[target.id] = state;
  });
  document.addEventListener("htmx:oobAfterSwap", function (evt) {
    var el = evt.target && evt.target.id ? document.getElementById(evt.target.id) : null;
    var state = el && using[el.id];
    if (!state) return;
    delete using[el.id];
    var details = el.querySelectorAll("details");
    state.open.forEach(function (i) { if (details[i]) details[i].open = true; });
    Object.keys(state.values).forEach(function (id) {
      var f = document.getElementById(id);
      if (!f || !el.contains(f)) return;
      if (f.type === "checkbox" || f.type === "radio") f.checked = state.values[id]; else f.value = state.values[id];
    });
    var focus = state.focus && document.getElementById(state.focus);
    if (focus && el.contains(focus)) focus.focus();
  });

  // The result section of a job that finished while this page's socket was down: its snapshot leaves the
  // player out (a page that has one keeps it), so ask the page for it once.
  var resultAsked = {};
  function resultFollows(id) {
    var box = document.getElementById("job-" + id + "-result");
    if (!box || box.getAttribute("data-state") === "done" || resultAsked[id]) return;
    resultAsked[id] = true;
    setTimeout(function () {
      var now = document.getElementById("job-" + id + "-result");
      if (!now || now.getAttribute("data-state") === "done" || !window.htmx) return;
      window.htmx.ajax("GET", location.pathname, { target: "#job-" + id + "-result", select: "#job-" + id + "-result", swap: "outerHTML" });
    }, 1500);
  }

  // ---- Jobs: "yours" marks, tab-title progress, notifications, small form helpers -------------------------
  // Everything here reads data-* attributes of elements the server rendered (page or socket push); the server
  // checks every request, so these are conveniences only.
  var ACTIVE = { preparing: 1, submitted: 1, running: 1, collecting: 1 };
  var FINAL = { done: "finished", failed: "failed" };
  var baseTitle = document.title;
  var seen = {};      // job id -> last state this page saw
  var notified = {};  // job id -> state already announced
  var NOTIFY_KEY = "hub-notify";

  function me() { return document.body.dataset.user || ""; }
  function isAdmin() { return document.body.dataset.admin === "1"; }
  function notifyOn() {
    return "Notification" in window && Notification.permission === "granted" && localStorage.getItem(NOTIFY_KEY) === "on";
  }

  function announce(id, state, el) {
    if (notified[id] === state || !notifyOn()) return;
    notified[id] = state;
    var label = el.getAttribute("data-title") || ("Job " + id);
    try {
      var n = new Notification("Your job " + FINAL[state], { body: label, tag: "hub-job-" + id });
      n.onclick = function () { window.focus(); location.href = "/jobs/" + id + "/"; };
    } catch (e) { /* some browsers only allow notifications from a service worker: skip quietly */ }
  }

  function refresh() {
    var user = me();
    var progress = null;
    document.querySelectorAll("[data-owner]").forEach(function (el) {
      var mine = user && el.getAttribute("data-owner") === user;
      el.classList.toggle("mine", !!mine);
      if (el.classList.contains("owner-only")) el.hidden = !(mine || isAdmin());
      var tag = el.querySelector && el.querySelector(".mine-tag");
      if (tag) tag.hidden = !mine;
      var id = el.getAttribute("data-job");
      var state = el.getAttribute("data-state");
      if (id && state === "done" && el.id === "job-" + id + "-status") resultFollows(id);
      if (!mine || !id || !state) return;
      if (ACTIVE[state] && el.hasAttribute("data-progress") && progress === null) progress = el.getAttribute("data-progress");
      if (el.id === "job-" + id + "-status" && seen[id] && seen[id] !== state) {
        document.body.dispatchEvent(new CustomEvent("job-state-changed", { detail: { job: id, state: state } }));
      }
      if (FINAL[state] && seen[id] && !FINAL[seen[id]]) announce(id, state, el);
      seen[id] = state;
    });
    document.title = progress !== null ? progress + "% · " + baseTitle : baseTitle;
  }

  document.addEventListener("DOMContentLoaded", refresh);
  document.addEventListener("htmx:wsAfterMessage", refresh);
  document.addEventListener("htmx:afterSettle", refresh);
  document.addEventListener("htmx:oobAfterSwap", function (evt) {
    var id = (evt.target && evt.target.id) || "";
    var m = /^device-(\d+)-(queue|running)$/.exec(id);
    if (m) document.body.dispatchEvent(new CustomEvent("queue-changed-" + m[1]));
    var g = /^device-(\d+)-gauges$/.exec(id);  // a new reading: the sparkline may redraw (throttled)
    if (g) document.body.dispatchEvent(new CustomEvent("device-read-" + g[1]));
  });

  // Opt-in notifications: a button in the top bar, shown only where the browser supports them.
  function notifyButton() {
    var btn = document.getElementById("notify-toggle");
    if (!btn || !("Notification" in window)) return;
    btn.hidden = false;
    function paint() {
      var on = notifyOn();
      btn.setAttribute("aria-pressed", on ? "true" : "false");
      btn.textContent = on ? "Notifications on" : (Notification.permission === "denied" ? "Notifications blocked" : "Notify me");
      btn.disabled = Notification.permission === "denied";
      btn.title = Notification.permission === "denied" ? "Allow notifications for this site in the browser's settings" : "";
    }
    btn.addEventListener("click", function () {
      if (notifyOn()) { localStorage.setItem(NOTIFY_KEY, "off"); paint(); return; }
      Promise.resolve(Notification.requestPermission()).then(function (answer) {
        localStorage.setItem(NOTIFY_KEY, answer === "granted" ? "on" : "off");
        paint();
      });
    });
    paint();
  }
  document.addEventListener("DOMContentLoaded", notifyButton);

  // Picture preview beside a file input (data-preview="<img id>").
  document.addEventListener("change", function (evt) {
    var input = evt.target;
    if (input.matches && input.matches("input[type=file][data-preview]")) {
      var img = document.getElementById(input.getAttribute("data-preview"));
      if (!img) return;
      if (input.files && input.files[0]) { img.src = URL.createObjectURL(input.files[0]); img.hidden = false; }
      else { img.removeAttribute("src"); img.hidden = true; }
    }
    if (input.matches && input.matches("select[data-autosubmit]")) input.form.submit();
    showIf();
  });

  // data-show-if="name=value": show a block only when that radio/select has that value.
  function showIf() {
    document.querySelectorAll("[data-show-if]").forEach(function (el) {
      var parts = el.getAttribute("data-show-if").split("=");
      var form = el.closest("form");
      var field = form && form.querySelector("[name='" + parts[0] + "']:checked, select[name='" + parts[0] + "']");
      el.hidden = !(field && field.value === parts[1]);
    });
  }
  document.addEventListener("DOMContentLoaded", showIf);

  // A separate soundtrack (audio[data-sync-with=video id]) follows its video while the box is ticked.
  function syncOn(audio) {
    var box = document.querySelector("[data-sync-toggle='" + audio.id + "']");
    return !box || box.checked;
  }
  ["play", "pause", "seeked", "ratechange"].forEach(function (type) {
    document.addEventListener(type, function (evt) {
      var video = evt.target;
      if (!video || video.tagName !== "VIDEO" || !video.id) return;
      document.querySelectorAll("audio[data-sync-with='" + video.id + "']").forEach(function (audio) {
        if (!syncOn(audio)) return;
        if (Math.abs(audio.currentTime - video.currentTime) > 0.2) audio.currentTime = video.currentTime;
        audio.playbackRate = video.playbackRate;
        if (type === "play") audio.play().catch(function () {});
        if (type === "pause") audio.pause();
      });
    }, true);
  });
})();
