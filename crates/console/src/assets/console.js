// lightning-store's console: live updates of the page being read.
//
// The page's own URL, asked for as an event stream, sends the page's live
// region re-rendered by the server whenever the store changes what it
// shows. The region is swapped in place, keeping open <details> and the
// focused element (by id). The stream is closed while the tab is hidden,
// so that background tabs hold no connection, and reopened when it shows.
"use strict";

(function () {
  const live = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!live || !live.dataset.live || !window.EventSource) {
    return;
  }
  let source = null;

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function streamUrl() {
    const url = new URL(window.location.href);
    url.searchParams.set("live_after", live.dataset.live);
    return url.toString();
  }

  function swap(html, id) {
    const opened = Array.from(live.querySelectorAll("details[open][id]"), (d) => d.id);
    const focused = document.activeElement && live.contains(document.activeElement)
      ? document.activeElement.id
      : "";
    const parsed = new DOMParser().parseFromString(html, "text/html");
    live.replaceChildren(...parsed.body.childNodes);
    for (const key of opened) {
      const details = document.getElementById(key);
      if (details) {
        details.open = true;
      }
    }
    if (focused) {
      const element = document.getElementById(focused);
      if (element) {
        element.focus({ preventScroll: true });
      }
    }
    if (id) {
      live.dataset.live = id;
    }
  }

  function open() {
    if (source) {
      return;
    }
    source = new EventSource(streamUrl());
    source.addEventListener("open", () => say("Live: this page updates as the store changes."));
    source.addEventListener("update", (event) => {
      swap(event.data, event.lastEventId);
      say("Live: updated at " + new Date().toLocaleTimeString() + ".");
    });
    source.addEventListener("error", () => {
      if (source && source.readyState === EventSource.CLOSED) {
        source = null;
        say("Live updates stopped: reload the page.");
      } else {
        say("Live updates interrupted: reconnecting…");
      }
    });
  }

  function close() {
    if (source) {
      source.close();
      source = null;
      say("Live updates paused while the tab is hidden.");
    }
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      close();
    } else {
      open();
    }
  });
  if (!document.hidden) {
    open();
  }
})();
