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

// The login form, shown instead of every view while the dashboard needs a login (a 401 with
// {"login": true}); a right token sets the session cookie and the page starts again.
function showLogin(why) {
  viewGeneration++;  // live views stop
  document.getElementById("who").replaceChildren();
  const input = el("input", {id: "login-token", type: "password", placeholder: "thu_...", autocomplete: "off", size: 72});
  const message = el("p", {class: "error", id: "login-error"}, why && !/^log in/.test(why) ? why : "");
  const form = el("form", {id: "login", class: "login"},
      el("h1", {}, "Log in"),
      el("p", {class: "muted"}, "This dashboard is shared: log in with the token `tensorhub user add` printed for you."),
      el("label", {for: "login-token"}, "token"), input, el("button", {type: "submit", id: "login-submit"}, "log in"),
      message);
  form.addEventListener("submit", async e => {
    e.preventDefault();
    const res = await fetch("/api/login", {method: "POST", headers: {"Content-Type": "application/json"},
                                           body: JSON.stringify({token: input.value.trim()})});
    const answer = await res.json();
    if (!res.ok) {
      message.textContent = answer.error || `HTTP ${res.status}`;
      return;
    }
    start();
  });
  main().replaceChildren(form);
  showError("");
  input.focus();
}

function showWho() {
  const who = document.getElementById("who");
  if (!session.auth) return who.replaceChildren();
  const logout = el("button", {id: "logout", class: "small"}, "log out");
  logout.addEventListener("click", async () => {
    await fetch("/api/logout", {method: "POST"});
    showLogin("");
  });
  who.replaceChildren(el("span", {id: "who-user"}, `${session.user} (${session.role})`), " ", logout);
}

// Asks who this is, then routes; a dashboard that needs a login shows the form instead.
async function start() {
  const res = await fetch("/api/session", {cache: "no-store"});
  const answer = await res.json();
  if (res.status === 401) return showLogin(answer.error);
  session = answer;
  showWho();
  route();
}

window.addEventListener("hashchange", () => { if (!document.getElementById("login")) route(); });
start();
