// A "Copy" button beside every command a page shows (pre.cmd, code.cmd): a file of its own, since the Content
// Security Policy allows no inline script. The clipboard API needs a secure context (https or localhost); elsewhere
// the text is copied through a hidden selection, and where neither works the button says to select it by hand.
(function () {
  "use strict";

  function bySelection(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "copy-buffer";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try {
      ok = document.execCommand("copy");
    } catch (e) {
      ok = false;
    }
    document.body.removeChild(area);
    return ok;
  }

  function said(button, ok) {
    button.textContent = ok ? "Copied" : "Select it to copy";
    window.setTimeout(function () { button.textContent = "Copy"; }, 2000);
  }

  function copy(text, button) {
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { said(button, true); },
        function () { said(button, bySelection(text)); }
      );
    } else {
      said(button, bySelection(text));
    }
  }

  function button(command) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "copy";
    b.textContent = "Copy";
    b.title = "Copy this command";
    b.addEventListener("click", function () { copy(command.textContent.trim(), b); });
    return b;
  }

  document.querySelectorAll("pre.cmd").forEach(function (pre) {
    var box = document.createElement("div");
    box.className = "cmd-box";
    pre.parentNode.insertBefore(box, pre);
    box.appendChild(pre);
    box.appendChild(button(pre));
  });
  document.querySelectorAll("code.cmd").forEach(function (code) {
    code.insertAdjacentElement("afterend", button(code));
  });
})();
