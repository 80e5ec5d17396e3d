// Copy buttons: a button with data-copy="<field id>" copies that field's text to the clipboard
// and says so in the status line next to it (or why it could not).

/** Write `text` to the clipboard: the Clipboard API, else the selected field and execCommand. */
async function writeClipboard(text, field) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    field.select();
    return document.execCommand?.("copy") === true;
  }
}

export function bindCopyButtons(root, statusEl) {
  for (const button of root?.querySelectorAll("button[data-copy]") ?? []) {
    button.addEventListener("click", async () => {
      const field = document.getElementById(button.dataset.copy);
      if (!field) return;
      const what = button.textContent.replace(/^Copy\s+/i, "");
      const ok = await writeClipboard(field.value, field);
      if (statusEl) statusEl.textContent = ok ? `Copied the ${what}.` : `Could not copy the ${what}: select it and press Ctrl+C.`;
    });
  }
}
