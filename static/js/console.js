// Loopwarden console: toasts for actions and for requests that failed, and a link to a
// collapsed card (/reconcile/#op-7) opening it. Nothing else needs script: every form also
// works as a plain POST, and a collapsed card opens with a click.
(function () {
  "use strict";

  function toast(message, kind) {
    var box = document.getElementById("toasts");
    if (!box || !message) return;
    var item = document.createElement("div");
    item.className = "toast " + (kind || "success");
    item.setAttribute("role", kind === "error" ? "alert" : "status");
    item.textContent = message;
    box.appendChild(item);
    setTimeout(function () { item.classList.add("leaving"); }, 4500);
    setTimeout(function () { item.remove(); }, 5000);
  }

  // Messages rendered by the server (after a plain POST + redirect) fade out the same way.
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("#toasts .toast").forEach(function (item) {
      setTimeout(function () { item.classList.add("leaving"); }, 4500);
      setTimeout(function () { item.remove(); }, 5000);
    });
  });

  // A link to a card folded in a <details> opens it: the card it names is what you came for.
  function openTarget() {
    if (!location.hash) return;
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!target) return;
    var fold = target.matches("details") ? target : target.querySelector("details");
    if (fold && !fold.open) fold.open = true;
  }
  document.addEventListener("DOMContentLoaded", openTarget);
  window.addEventListener("hashchange", openTarget);

  document.addEventListener("lw:toast", function (event) {
    var detail = event.detail || {};
    toast(detail.message, detail.kind || "success");
  });

  var offline = false;
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (status === 403) toast("You are not allowed to do that.", "error");
    else if (status === 404) toast("Not found: it may have been removed.", "error");
    else if (status === 409) toast("That was refused: the state changed. Reload the page.", "error");
    else toast("The server answered " + status + ". Nothing was changed by this page.", "error");
  });
  document.addEventListener("htmx:sendError", function () {
    if (!offline) toast("Cannot reach the server. Live parts retry by themselves.", "error");
    offline = true;
    document.body.classList.add("offline");
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful && offline) {
      offline = false;
      document.body.classList.remove("offline");
      toast("Connected again.", "success");
    }
  });
})();
