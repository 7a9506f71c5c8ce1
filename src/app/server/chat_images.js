"use strict";
// The images attached to the next message: by file picker, drag-and-drop on the page or paste in
// the text box, shown as thumbnails that remove themselves. Also the composer's notice line.
(() => {
  const $ = (id) => document.getElementById(id);
  const IMAGE_TYPES = ["image/png", "image/jpeg", "image/bmp"];  // what the server decodes
  let pending = [];  // {name, url}: url is the data: URI sent as the image_url

  function notice(text) {
    $("notice").textContent = text;
    $("notice").hidden = !text;
  }

  function addImages(files) {
    const images = [...files].filter((f) => f.type.startsWith("image/"));
    if (!images.length) return false;
    if ($("attach").hidden) { notice("This model is text-only: it takes no images."); return true; }
    for (const f of images) {
      if (!IMAGE_TYPES.includes(f.type)) {
        notice(`${f.name || "The image"}: not a PNG, JPEG or BMP image.`);
        continue;
      }
      const reader = new FileReader();
      reader.onload = () => {
        pending.push({ name: f.name || "pasted image", url: reader.result });
        renderThumbs();
      };
      reader.readAsDataURL(f);
    }
    return true;
  }

  function renderThumbs() {
    const box = $("thumbs");
    box.replaceChildren();
    pending.forEach((p) => {
      const t = document.createElement("div");
      t.className = "thumb";
      const img = document.createElement("img");
      img.src = p.url;
      img.alt = p.name;
      img.title = p.name;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "✕";
      remove.title = "Remove " + p.name;
      remove.setAttribute("aria-label", remove.title);
      remove.addEventListener("click", () => {
        pending = pending.filter((x) => x !== p);
        renderThumbs();
      });
      t.append(img, remove);
      box.append(t);
    });
  }

  $("image").addEventListener("change", () => { addImages($("image").files); $("image").value = ""; });
  $("prompt").addEventListener("paste", (e) => { if (addImages(e.clipboardData.files)) e.preventDefault(); });

  // Dragging over child elements fires enter/leave pairs: count them to know when it has left.
  let drags = 0;
  const dragsFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes("Files");
  $("main").addEventListener("dragenter", (e) => {
    if (!dragsFiles(e)) return;
    drags++;
    $("drop").hidden = false;
    e.preventDefault();
  });
  $("main").addEventListener("dragover", (e) => { if (dragsFiles(e)) e.preventDefault(); });
  $("main").addEventListener("dragleave", () => { if (--drags <= 0) { drags = 0; $("drop").hidden = true; } });
  $("main").addEventListener("drop", (e) => {
    drags = 0;
    $("drop").hidden = true;
    if (!dragsFiles(e)) return;
    e.preventDefault();
    addImages(e.dataTransfer.files);
  });

  Object.assign(window.edgevl, {
    notice,
    images: {
      count: () => pending.length,
      take() {  // the data: URIs, handed to the message being sent
        const urls = pending.map((p) => p.url);
        pending = [];
        renderThumbs();
        return urls;
      },
      restore(urls) {  // a turn taken back returns its images
        pending = urls.map((url, i) => ({ name: `image ${i + 1}`, url }));
        renderThumbs();
      },
    },
  });
})();
