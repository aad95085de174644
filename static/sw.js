// Tiiny Hub's service worker: served at /sw.js (scope: the whole hub) by notify.views.service_worker.
// It keeps no data. A push (sent by notify.senders.send_webpush, encrypted for this browser) carries
// {title, body, url, tag}; it is shown as a notification, and a click focuses the hub's tab on that page or
// opens one. Only the hub's own pages are opened: a url that is not a path on this origin becomes "/".
/* eslint-env serviceworker */
"use strict";

function samePath(url) {
  return typeof url === "string" && url.charAt(0) === "/" && url.charAt(1) !== "/" ? url : "/";
}

self.addEventListener("install", function () { self.skipWaiting(); });
self.addEventListener("activate", function (event) { event.waitUntil(self.clients.claim()); });

self.addEventListener("push", function (event) {
  var data = {};
  try { data = event.data ? event.data.json() : {}; } catch (e) { data = { body: event.data ? event.data.text() : "" }; }
  var title = data.title || "Tiiny Hub";
  event.waitUntil(self.registration.showNotification(title, {
    body: data.body || "",
    tag: data.tag || undefined,
    icon: "/static/img/icon-192.png",
    badge: "/static/img/favicon-32.png",
    data: { url: samePath(data.url) }
  }));
});

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var path = samePath(event.notification.data && event.notification.data.url);
  var target = new URL(path, self.location.origin).href;
  event.waitUntil(self.clients.matchAll({ type: "window", includeUncontrolled: true }).then(function (list) {
    for (var i = 0; i < list.length; i++) {
      if (list[i].url === target && "focus" in list[i]) return list[i].focus();
    }
    for (var j = 0; j < list.length; j++) {  // a hub tab on another page: take it there
      if ("navigate" in list[j] && "focus" in list[j]) {
        return list[j].focus().then(function (client) { return client.navigate(target); });
      }
    }
    return self.clients.openWindow ? self.clients.openWindow(target) : undefined;
  }));
});
