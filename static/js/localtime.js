// Times in the person's own zone, in pushed fragments too.
// The server writes every time as <time datetime="ISO UTC" data-fmt="Django format" data-tz="zone of the
// render"> (hub/templatetags/hub_time.py). A page load is rendered in the person's zone already; a push is
// rendered once for every viewer in the hub's zone. This rewrites the text of each <time data-fmt> whose
// data-tz is not the page's (<body data-tz>) into the page's zone, in the same format, so a pushed time reads
// like a page load. Only the text of <time> elements changes: no element is replaced (players stay put).
(function () {
  "use strict";
  var DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  var formatters = {};

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  // The wall clock of an instant in a zone, as numbers (names come from the tables above, as Django's do).
  function clock(date, zone) {
    var f = formatters[zone];
    if (!f) {
      f = formatters[zone] = new Intl.DateTimeFormat("en-US", {
        timeZone: zone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric",
        hour: "numeric", minute: "numeric", second: "numeric"
      });
    }
    var c = {};
    f.formatToParts(date).forEach(function (p) { if (p.type !== "literal") c[p.type] = parseInt(p.value, 10); });
    if (c.hour === 24) c.hour = 0;
    c.weekday = new Date(Date.UTC(c.year, c.month - 1, c.day)).getUTCDay();
    return c;
  }

  // Django's date format letters that the templates use; null for any other letter (the text stays).
  function format(date, fmt, zone) {
    var c = clock(date, zone);
    var out = "";
    for (var i = 0; i < fmt.length; i++) {
      var ch = fmt.charAt(i);
      switch (ch) {
        case "\\": i += 1; out += fmt.charAt(i); break;
        case "D": out += DAYS[c.weekday]; break;
        case "j": out += c.day; break;
        case "d": out += pad(c.day); break;
        case "M": out += MONTHS[c.month - 1]; break;
        case "Y": out += c.year; break;
        case "H": out += pad(c.hour); break;
        case "i": out += pad(c.minute); break;
        case "s": out += pad(c.second); break;
        default:
          if (/[A-Za-z]/.test(ch)) return null;
          out += ch;
      }
    }
    return out;
  }

  function localize() {
    var zone = document.body && document.body.getAttribute("data-tz");
    if (!zone) return;
    document.querySelectorAll("time[data-fmt][datetime]").forEach(function (el) {
      if (el.getAttribute("data-tz") === zone) return;
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date.getTime())) return;
      var text;
      try { text = format(date, el.getAttribute("data-fmt"), zone); } catch (e) { return; }  // unknown zone
      if (text === null) return;
      el.textContent = text;
      el.setAttribute("data-tz", zone);
    });
  }

  document.addEventListener("DOMContentLoaded", localize);
  document.addEventListener("htmx:wsAfterMessage", localize);  // after a push's fragments are swapped in
  document.addEventListener("htmx:afterSettle", localize);
})();
