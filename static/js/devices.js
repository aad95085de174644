// Device detail chart: reads the stored history (never the device) and redraws every 10 s.
(function () {
  "use strict";
  var el = document.getElementById("device-chart");
  if (!el || typeof uPlot === "undefined") return;
  var range = "hour";
  var plot = null;
  var css = getComputedStyle(document.documentElement);
  function color(name, fallback) { return (css.getPropertyValue(name) || fallback).trim(); }
  var series = [
    {},
    { label: "NPU %", stroke: color("--accent", "#2456a6"), width: 2 },
    { label: "NPU memory %", stroke: "#8e44ad", width: 2 },
    { label: "CPU %", stroke: color("--ok", "#1d6b38"), width: 1.5 },
    { label: "Memory %", stroke: color("--warn", "#8a5300"), width: 1.5 }
  ];
  function opts() {
    return { width: Math.max(el.clientWidth, 280), height: 240, series: series,
      scales: { y: { range: [0, 100] } }, axes: [{}, { values: function (u, v) { return v.map(function (x) { return x + "%"; }); } }] };
  }
  function load() {
    fetch(el.dataset.url + "?range=" + range, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (d) {
        var data = [d.t, d.npu_util, d.npu_mem, d.cpu, d.mem];
        if (plot) { plot.setData(data); } else { plot = new uPlot(opts(), data, el); }
      })
      .catch(function () { /* keep the last chart; the next tick retries */ });
  }
  document.querySelectorAll(".chart-range").forEach(function (b) {
    b.addEventListener("click", function () {
      range = b.dataset.range;
      document.querySelectorAll(".chart-range").forEach(function (x) { x.setAttribute("aria-pressed", x === b ? "true" : "false"); });
      load();
    });
  });
  window.addEventListener("resize", function () { if (plot) plot.setSize({ width: Math.max(el.clientWidth, 280), height: 240 }); });
  load();
  setInterval(function () { if (!document.hidden) load(); }, 10000);
})();
