// `?` (or the ? button) opens the list of keyboard shortcuts; Escape or Close shuts it. The keys
// themselves are bound where they act (controls.js: playback; main.js: Run from the editor).

const typing = (t) => t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT" || t.tagName === "SELECT" || t.isContentEditable);

/** Open `dialog` on `?` typed outside a text field, and on a click of `button`. */
export function bindShortcutsHelp({ dialog, button }) {
  const open = () => {
    if (!dialog.open) dialog.showModal();
  };
  button?.addEventListener("click", open);
  document.addEventListener("keydown", (e) => {
    if (e.key !== "?" || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    e.preventDefault();
    open();
  });
}
