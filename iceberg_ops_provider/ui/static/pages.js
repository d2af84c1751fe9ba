(function () {
  var framed = false;
  try { framed = window.top !== window && !!window.top.document; } catch (e) { framed = false; }
  // Airflow's frame is sandboxed without allow-top-navigation: a link of Airflow's own document, clicked,
  // navigates Airflow's window where this frame may not.
  function openOnTop(href) {
    var outer = window.top.document.createElement("a");
    outer.href = href;
    window.top.document.body.appendChild(outer);
    outer.click();
    outer.remove();
  }
  var login = document.querySelector("a[data-login]");
  if (login) {
    if (framed) openOnTop(login.getAttribute("data-login"));
    else window.location.assign(login.getAttribute("data-login"));
    return;
  }
  if (!framed) return;
  document.addEventListener("click", function (event) {
    var anchor = event.target.closest ? event.target.closest("a[data-top]") : null;
    if (!anchor || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey) return;
    event.preventDefault();
    openOnTop(anchor.href);
  });
})();
