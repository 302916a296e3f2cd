// The Projector view (#/projector?run=RUN): work in progress.
"use strict";
views.projector = {show: async () => { main().replaceChildren(el("h1", {}, "Projector")); }};
