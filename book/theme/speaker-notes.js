// Speaker notes (issue 48; book/README.md, "Speaker notes"). Every page ends with a
// <div class="speaker-notes">, hidden by theme/speaker-notes.css. This script, loaded by every
// page (`additional-js` in book.toml; no network, works from disk), adds to the menu bar a
// button that shows or hides them, bound to the `n` key too; the choice is kept in localStorage,
// so a presenter turns the notes on once and every page shows them. `N` (Shift+n), or the link
// in the notes' label, opens a presenter's window with the notes alone, which follows the page
// the main window shows: the room sees the book, the presenter's screen the notes.
// Modelled on Comprehensive Rust's theme/speaker-notes.js (a state in localStorage, a menu-bar
// button, a pop-out window that follows the main one through the `storage` event).
(function () {
  "use strict";
  var STATE = "gnn-workbook.speaker-notes"; // "shown" or absent
  var PAGE = "gnn-workbook.current-page"; // the page the main window shows
  var WINDOW_HASH = "#speaker-notes-window";
  // The texts a presenter sees, in the edition's language (<html lang>: "en", "zh-CN").
  var TEXTS = {
    en: {
      label: "Speaker notes",
      gap: " ",
      button: "Speaker notes (n: show or hide; N: presenter's window)",
      popout: "(open in a presenter's window: N)",
    },
    "zh-CN": {
      label: "讲师备注",
      gap: "", // no space before a full-width parenthesis
      button: "讲师备注（n：显示或隐藏；N：讲师窗口）",
      popout: "（在讲师窗口中打开：N）",
    },
  };
  var text = TEXTS[document.documentElement.lang] || TEXTS.en;
  var root = document.documentElement;
  var notes = document.querySelectorAll(".speaker-notes");

  // localStorage can be missing or refused (a private window, a locked-down browser): the
  // notes then stay hidden until toggled, and the toggle lasts for the page.
  function load(key) {
    try {
      return window.localStorage.getItem(key);
    } catch (e) {
      return null;
    }
  }
  function store(key, value) {
    try {
      if (value === null) window.localStorage.removeItem(key);
      else window.localStorage.setItem(key, value);
    } catch (e) {
      /* not remembered: see load() */
    }
  }

  var button = null;
  function apply(shown) {
    root.classList.toggle("speaker-notes-shown", shown);
    if (button) button.setAttribute("aria-pressed", shown ? "true" : "false");
  }
  function toggle() {
    var shown = !root.classList.contains("speaker-notes-shown");
    store(STATE, shown ? "shown" : null);
    apply(shown);
  }
  function openWindow() {
    var url = new URL(window.location.href);
    url.hash = WINDOW_HASH;
    window.open(url.href, "gnn-workbook-speaker-notes", "popup,width=720,height=800");
  }

  if (window.location.hash === WINDOW_HASH) {
    // The presenter's window: the title and the notes, and follow the main window.
    root.classList.add("speaker-notes-window");
    apply(true);
    window.addEventListener("storage", function (event) {
      if (event.key === PAGE && event.newValue && event.newValue !== window.location.pathname) {
        window.location.href = event.newValue + WINDOW_HASH;
      }
    });
  } else {
    store(PAGE, window.location.pathname);
    apply(load(STATE) === "shown");
  }

  // Each block of notes gets its label (and the way to the presenter's window).
  Array.prototype.forEach.call(notes, function (block) {
    var label = document.createElement("p");
    label.className = "speaker-notes-label";
    label.textContent = text.label;
    if (!root.classList.contains("speaker-notes-window")) {
      label.appendChild(document.createTextNode(text.gap));
      // A button, not a link: it opens a window, it leads to no page.
      var popout = document.createElement("button");
      popout.type = "button";
      popout.className = "speaker-notes-popout";
      popout.textContent = text.popout;
      popout.addEventListener("click", openWindow);
      label.appendChild(popout);
    }
    block.insertBefore(label, block.firstChild);
  });

  // The menu bar's button, on the pages that have notes.
  var bar = document.querySelector("#mdbook-menu-bar .left-buttons, .menu-bar .left-buttons");
  if (notes.length && bar) {
    button = document.createElement("button");
    button.id = "speaker-notes-toggle";
    button.type = "button";
    button.className = "icon-button";
    button.title = text.button;
    button.setAttribute("aria-label", text.button);
    button.setAttribute("aria-keyshortcuts", "n");
    // A speech bubble, drawn here (no icon font, no network).
    button.innerHTML =
      '<span class="fa-svg"><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 512 512" ' +
      'aria-hidden="true"><path d="M64 32C28.7 32 0 60.7 0 96v224c0 35.3 28.7 64 64 64h64v80' +
      'c0 6.4 3.8 12.2 9.7 14.7s12.7 1.3 17.3-3.1L252.5 384H448c35.3 0 64-28.7 64-64V96' +
      'c0-35.3-28.7-64-64-64H64zm64 112h256v32H128v-32zm0 96h192v32H128v-32z"/></svg></span>';
    button.addEventListener("click", toggle);
    bar.appendChild(button);
    apply(root.classList.contains("speaker-notes-shown"));
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || !notes.length) return;
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) {
      return; // typing in the search box
    }
    if (event.key === "n") {
      event.preventDefault();
      toggle();
    } else if (event.key === "N") {
      event.preventDefault();
      openWindow();
    }
  });
})();
