// Drop a picture the hub made onto the new-job form: it goes to the "Fill in from a picture" form
// (#from-file), whose server answer is the page filled in from the file's settings (jobs.files.story).
// A drop onto a file input of the job form itself (a start image, a voice) is left to that input.
(function () {
  "use strict";
  function target(event) {
    var el = event.target;
    if (el && el.closest && el.closest("input[type=file]")) return null;
    return document.getElementById("from-file") && el && el.closest && el.closest("#new-job");
  }
  function hasFile(event) {
    var types = event.dataTransfer && event.dataTransfer.types;
    return !!types && Array.prototype.indexOf.call(types, "Files") >= 0;
  }
  document.addEventListener("dragover", function (event) {
    if (!target(event) || !hasFile(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
    document.getElementById("new-job").classList.add("drop-ready");
  });
  document.addEventListener("dragleave", function (event) {
    var page = document.getElementById("new-job");
    if (page && event.target === page) page.classList.remove("drop-ready");
  });
  document.addEventListener("drop", function (event) {
    var page = document.getElementById("new-job");
    if (page) page.classList.remove("drop-ready");
    if (!target(event) || !hasFile(event)) return;
    event.preventDefault();
    var input = document.getElementById("id_settings_file");
    if (!input || !event.dataTransfer.files.length) return;
    input.files = event.dataTransfer.files;
    input.dispatchEvent(new Event("change", { bubbles: true }));
  });
})();
