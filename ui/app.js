// tensorhub ui: the page's router. #/<view>/<arg>?<query> shows views[<view>] (registered by
// the view files index.html loads before this one); no hash shows the Overview.
"use strict";

let currentView = null;

async function route() {
  const gen = ++viewGeneration;
  currentView?.leave?.();
  const hash = location.hash || "#/overview";
  const [path, query = ""] = hash.slice(1).split("?");
  const [, name, ...rest] = path.split("/");
  const view = views[name] || views.overview;
  currentView = view;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", views[a.dataset.view] === view);
  showError("");
  try {
    await view.show(gen, rest.map(decodeURIComponent).join("/"), new URLSearchParams(query));
  } catch (e) {
    if (gen === viewGeneration) {
      main().replaceChildren();  // not the previous view's page under this view's tab
      showError(e.message);
    }
  }
}

window.addEventListener("hashchange", route);
route();
