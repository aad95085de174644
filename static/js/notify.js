// Tiiny Hub notifications in the browser (the notify app; the server side is notify/).
// - /notify/: the tab's permission (a button asks for it), a sound option, Web Push on/off for this browser.
// - Any page: a short sound when one of *my* jobs finishes or fails (hub.js fires "job-state-changed" for the
//   job whose status box it shows), and the favicon shows the progress of my running job (hub.js already puts
//   "42% · title" in the tab's title). In-tab notifications themselves are hub.js's ("Notify me").
// No inline code (CSP): everything hangs off ids and data-* attributes the server rendered.
(function () {
  "use strict";
  var NOTIFY_KEY = "hub-notify";        // shared with hub.js: "on" = show notifications in this tab
  var SOUND_KEY = "hub-notify-sound";   // "on" = beep when my job ends
  var FINAL = { done: 1, failed: 1 };
  var ACTIVE = { preparing: 1, submitted: 1, running: 1, collecting: 1 };

  function $(id) { return document.getElementById(id); }
  function me() { return (document.body && document.body.dataset.user) || ""; }
  function store(key, value) { try { localStorage.setItem(key, value); } catch (e) { /* private mode */ } }
  function stored(key) { try { return localStorage.getItem(key); } catch (e) { return null; } }
  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (e) { return ""; }
  }
  // Buttons and .field boxes set their own display, which wins over [hidden]: set both.
  function show(el, visible) {
    if (!el) return;
    el.hidden = !visible;
    el.style.display = visible ? "" : "none";
  }
  function say(text) { var el = $("notify-push-status"); if (el) el.textContent = text; }

  // ---- sound: a short two-note beep made with WebAudio (no file to fetch) -----------------------------------
  var audio = null;
  function beep(ok) {
    var Ctx = window.AudioContext || window.webkitAudioContext;
    if (!Ctx) return;
    try {
      audio = audio || new Ctx();
      var notes = ok ? [660, 880] : [440, 330];
      notes.forEach(function (freq, i) {
        var osc = audio.createOscillator(), gain = audio.createGain(), at = audio.currentTime + i * 0.16;
        osc.type = "sine";
        osc.frequency.value = freq;
        gain.gain.setValueAtTime(0.0001, at);
        gain.gain.exponentialRampToValueAtTime(0.2, at + 0.02);
        gain.gain.exponentialRampToValueAtTime(0.0001, at + 0.15);
        osc.connect(gain).connect(audio.destination);
        osc.start(at);
        osc.stop(at + 0.16);
      });
      document.body.dataset.notifyBeeped = String(Number(document.body.dataset.notifyBeeped || 0) + 1);
    } catch (e) { /* audio not allowed yet: never mind */ }
  }
  // hub.js dispatches it on <body> without bubbling: listen in the capture phase, which every event passes.
  document.addEventListener("job-state-changed", function (evt) {
    var state = evt.detail && evt.detail.state;
    if (FINAL[state] && stored(SOUND_KEY) === "on") beep(state === "done");
  }, true);

  // ---- favicon: a ring showing my running job's progress -----------------------------------------------------
  var iconLinks = null, lastDrawn = null;
  function drawIcon(progress) {
    var canvas = document.createElement("canvas");
    canvas.width = canvas.height = 32;
    var ctx = canvas.getContext("2d");
    if (!ctx) return null;
    ctx.fillStyle = "#2456a6";
    ctx.beginPath(); ctx.arc(16, 16, 15, 0, 2 * Math.PI); ctx.fill();
    ctx.strokeStyle = "#ffffff"; ctx.lineWidth = 5;
    ctx.beginPath(); ctx.arc(16, 16, 10, -Math.PI / 2, -Math.PI / 2 + 2 * Math.PI * progress / 100); ctx.stroke();
    return canvas.toDataURL("image/png");
  }
  function favicon() {
    if (!iconLinks) {
      iconLinks = Array.prototype.slice.call(document.querySelectorAll("link[rel~=icon]"));
      iconLinks.forEach(function (l) { l.dataset.original = l.getAttribute("href"); });
    }
    var user = me(), progress = null;
    document.querySelectorAll("[data-job][data-owner][data-state]").forEach(function (el) {
      if (progress !== null || !user || el.getAttribute("data-owner") !== user) return;
      if (ACTIVE[el.getAttribute("data-state")] && el.hasAttribute("data-progress")) {
        progress = Math.max(0, Math.min(100, Number(el.getAttribute("data-progress")) || 0));
      }
    });
    var key = progress === null ? "" : String(Math.round(progress));
    if (key === lastDrawn) return;
    lastDrawn = key;
    var url = progress === null ? null : drawIcon(progress);
    iconLinks.forEach(function (l) { l.setAttribute("href", url || l.dataset.original); });
    if (document.body) document.body.dataset.notifyIcon = key;
  }
  document.addEventListener("DOMContentLoaded", favicon);
  document.addEventListener("htmx:wsAfterMessage", favicon);
  document.addEventListener("htmx:afterSettle", favicon);

  // ---- the /notify/ page -----------------------------------------------------------------------------------
  function b64ToBytes(text) {
    var pad = "=".repeat((4 - (text.length % 4)) % 4);
    var raw = atob((text + pad).replace(/-/g, "+").replace(/_/g, "/"));
    var out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }
  function post(url, body) {
    return fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body)
    }).then(function (r) { return r.json().then(function (data) { if (!r.ok) throw new Error(data.error || r.status); return data; }); });
  }
  function pushSupported() {
    return "serviceWorker" in navigator && "PushManager" in window && window.isSecureContext;
  }
  function registration() {
    return navigator.serviceWorker.register("/sw.js", { scope: "/" }).then(function () { return navigator.serviceWorker.ready; });
  }

  function paint() {
    var perm = $("notify-permission");
    if (!perm) return;
    var has = "Notification" in window;
    var state = has ? Notification.permission : "unsupported";
    perm.textContent = { granted: "allowed", denied: "blocked", "default": "not asked yet", unsupported: "not supported by this browser" }[state] || state;
    perm.dataset.permission = state;
    var hint = $("notify-permission-hint");
    if (hint) hint.textContent = state === "denied" ? "Allow notifications for this site in the browser's settings, then reload." : "";
    // hub.js shows notifications in a tab when the permission is granted *and* they are on ("Notify me").
    var on = has && state === "granted" && stored(NOTIFY_KEY) === "on";
    perm.dataset.on = on ? "1" : "0";
    show($("notify-enable"), has && !on && state !== "denied");
    $("notify-enable").textContent = state === "granted" ? "Notify me in this browser" : "Allow notifications";
    show($("notify-disable"), on);
    show($("notify-try"), state === "granted");
    var sound = $("notify-sound");
    if (sound) sound.checked = stored(SOUND_KEY) === "on";
    var pushOnBtn = $("notify-push-on"), off = $("notify-push-off");
    if (!pushSupported()) {
      show(pushOnBtn, false);
      show(off, false);
      if (!window.isSecureContext) say("Web Push needs the hub on HTTPS (or opened as localhost); in-tab notifications still work.");
      return;
    }
    registration().then(function (reg) { return reg.pushManager.getSubscription(); }).then(function (sub) {
      show(pushOnBtn, !sub && state !== "denied");
      show(off, !!sub);
      document.body.dataset.pushSubscribed = sub ? "1" : "0";
    }).catch(function () { show(pushOnBtn, false); });
  }

  function enable() {
    return Promise.resolve(Notification.requestPermission()).then(function (answer) {
      store(NOTIFY_KEY, answer === "granted" ? "on" : "off");
      paint();
      return answer;
    });
  }

  function pushOn() {
    say("Subscribing…");
    enable().then(function (answer) {
      if (answer !== "granted") throw new Error("notifications are not allowed");
      return Promise.all([registration(), fetch("/notify/push/key/", { credentials: "same-origin" }).then(function (r) { return r.json(); })]);
    }).then(function (both) {
      var reg = both[0], key = both[1].publicKey;
      return reg.pushManager.getSubscription().then(function (old) {
        return old || reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: b64ToBytes(key) });
      });
    }).then(function (sub) {
      return post("/notify/push/subscribe/", { subscription: sub.toJSON(), name: browserName() });
    }).then(function (data) {
      say("This browser is told about your jobs even with no tab open (“" + data.name + "”).");
      document.body.dataset.pushChannel = String(data.channel);
      paint();
    }).catch(function (err) { say("Web Push could not be turned on: " + err.message); paint(); });
  }

  function pushOff() {
    registration().then(function (reg) { return reg.pushManager.getSubscription(); }).then(function (sub) {
      if (!sub) return null;
      var endpoint = sub.endpoint;
      return sub.unsubscribe().then(function () { return post("/notify/push/unsubscribe/", { endpoint: endpoint }); });
    }).then(function () { say("Web Push is off in this browser."); paint(); })
      .catch(function (err) { say("Could not turn Web Push off: " + err.message); paint(); });
  }

  function browserName() {
    var ua = navigator.userAgent;
    var name = /Firefox\//.test(ua) ? "Firefox" : /Edg\//.test(ua) ? "Edge" : /Chrome\//.test(ua) ? "Chrome" : /Safari\//.test(ua) ? "Safari" : "Browser";
    var where = /Android/.test(ua) ? "Android" : /iPhone|iPad/.test(ua) ? "iOS" : /Mac OS/.test(ua) ? "Mac" : /Windows/.test(ua) ? "Windows" : /Linux/.test(ua) ? "Linux" : "";
    return name + (where ? " on " + where : "");
  }

  function tryIt() {
    try {
      var n = new Notification("Tiiny Hub", { body: "Notifications work in this tab.", tag: "hub-test" });
      n.onclick = function () { window.focus(); n.close(); };
    } catch (e) {
      if ("serviceWorker" in navigator) registration().then(function (reg) { reg.showNotification("Tiiny Hub", { body: "Notifications work in this browser.", tag: "hub-test" }); });
    }
    if (stored(SOUND_KEY) === "on") beep(true);
  }

  // The add form: data-show-if-not="name=value" hides a field for one choice (hub.js does data-show-if).
  function showIfNot() {
    document.querySelectorAll("[data-show-if-not]").forEach(function (el) {
      var parts = el.getAttribute("data-show-if-not").split("=");
      var form = el.closest("form");
      var field = form && form.querySelector("select[name='" + parts[0] + "'], [name='" + parts[0] + "']:checked");
      show(el, !(field && field.value === parts[1]));
    });
  }
  document.addEventListener("change", showIfNot);

  document.addEventListener("DOMContentLoaded", function () {
    showIfNot();
    if (!$("notify-permission")) return;
    $("notify-enable").addEventListener("click", enable);
    $("notify-disable").addEventListener("click", function () { store(NOTIFY_KEY, "off"); paint(); });
    $("notify-try").addEventListener("click", tryIt);
    $("notify-push-on").addEventListener("click", pushOn);
    $("notify-push-off").addEventListener("click", pushOff);
    $("notify-sound").addEventListener("change", function (evt) {
      store(SOUND_KEY, evt.target.checked ? "on" : "off");
      if (evt.target.checked) beep(true);  // a click is a gesture: the audio context may start now
    });
    paint();
  });
})();
