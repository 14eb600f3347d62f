// The live demo: follows one collection, or one live view of a collection, with changefeed.js and changes it
// through the REST API (a view through its source).
import { itemLabel, renderList, sectionLabel, subscribe, writer } from "/v1/client/changefeed.js";

const $ = (selector) => document.querySelector(selector);
const nameInput = $("#collection-name");
const tokenInput = $("#token");
const statusOutput = $("#status");
const errorLine = $("#error");
const log = $("#log");
const fieldsets = ["#actions", "#section-actions", "#list-actions"].map($);
const viewSort = $("#view-sort");

const words = ("amber birch cedar dune ember fjord grove harbor iris juniper kelp lagoon meadow nectar orchid pebble " +
    "quartz river sage tundra umber valley willow yarrow zephyr").split(" ");
const pick = (list) => list[Math.floor(Math.random() * list.length)];
const randomIndex = (count) => Math.floor(Math.random() * count);
const newId = (prefix) => `${prefix}${Date.now().toString(36).slice(-4)}${Math.random().toString(36).slice(2, 6)}`;
const phrase = () => `${pick(words)} ${pick(words)}`;
const statuses = ["todo", "doing", "done", "blocked", "review"];
const task = () => ({ text: phrase(), status: pick(statuses.slice(0, 3)), priority: 1 + randomIndex(5) });

/** The sort orders the view's control offers, as `sortBy` descriptors. */
const sortOrders = {
    "priority-desc": [{ field: "/priority", order: "desc" }, { field: "/text" }],
    "priority-asc": [{ field: "/priority", order: "asc" }, { field: "/text" }],
    "text-asc": [{ field: "/text" }],
};

let subscription = null;
/** Counts the subscriptions opened, so that the last calls of one the page left are ignored. */
let opened = 0;
let list = null;
let current = { kind: "collection", name: null, source: null, sections: [], version: null };

const list$ = $("#list");
list = renderList(list$, {
    empty: "This collection has no items yet: insert one.",
    renderItem(item, element) {
        const text = document.createElement("span");
        text.className = "item-text";
        text.textContent = itemLabel(item.data);
        const meta = document.createElement("span");
        meta.className = "item-meta";
        meta.hidden = typeof item.data?.priority !== "number";
        meta.textContent = `p${item.data?.priority}`;
        meta.title = "priority";
        const id = document.createElement("code");
        id.className = "item-id";
        id.textContent = item.id;
        const actions = document.createElement("span");
        actions.className = "row-actions";
        const rowActions =
            current.kind === "view"
                ? [["row-up", "▲", "Raise the priority"], ["row-edit", "✎", "Next status"], ["row-delete", "✕", "Delete from the source"]]
                : [["row-up", "▲", "Move up"], ["row-edit", "✎", "Update"], ["row-delete", "✕", "Delete"]];
        for (const [action, label, title] of rowActions) {
            const button = document.createElement("button");
            button.type = "button";
            button.dataset.rowAction = action;
            button.title = title;
            button.textContent = label;
            actions.append(button);
        }
        element.replaceChildren(text, meta, id, actions);
    },
    renderHeader(section, element) {
        const title = document.createElement("span");
        title.className = "section-title";
        // A view's sections are its keys: `data` is {"key": <the value>}.
        const key = current.kind === "view" ? section.data?.key : undefined;
        title.textContent = key === undefined ? sectionLabel(section) : typeof key === "string" ? key : JSON.stringify(key);
        const id = document.createElement("span");
        id.className = "section-id";
        id.textContent = section.id;
        element.replaceChildren(title, id);
    },
});

function setStatus(status, detail) {
    window.demo?.statuses.push(status);
    statusOutput.dataset.status = status;
    const delay = detail?.delay !== undefined ? ` in ${(detail.delay / 1000).toFixed(1)} s` : "";
    statusOutput.textContent = status === "retrying" ? `retrying${delay}` : status;
    document.body.dataset.status = status;
    $("#missing").hidden = status !== "missing";
    $("#missing-name").textContent = current.name ?? "";
    $("#missing-kind").textContent = current.kind;
    $("#create-missing").hidden = current.kind === "view";
    const usable = status === "live";
    for (const fieldset of fieldsets) fieldset.disabled = !usable || current.kind === "view";
    $("#view-actions").disabled = !usable;
    $("#open-view").disabled = current.kind === "view";
    for (const control of document.querySelectorAll("#view-actions [data-view-action], #view-sort, #open-source")) {
        control.disabled = current.kind !== "view";
    }
}

function showError(message) {
    errorLine.hidden = !message;
    errorLine.textContent = message ?? "";
}

function addLog(text) {
    const entry = document.createElement("li");
    entry.textContent = text;
    log.prepend(entry);
    while (log.children.length > 60) log.lastElementChild.remove();
}

function summary(changes) {
    const part = (group, label) => {
        const counts = [
            ["+", group.inserted.length],
            ["−", group.deleted.length],
            ["↕", group.moved.length],
            ["✎", group.updated.length],
        ].filter(([, count]) => count > 0);
        return counts.length ? `${label} ${counts.map(([sign, count]) => sign + count).join(" ")}` : "";
    };
    return [part(changes.sections, "sections"), part(changes.items, "items")].filter(Boolean).join(" · ");
}

function setVersion(version) {
    current.version = version;
    $("#version").textContent = version ?? "";
    document.body.dataset.version = version ?? "";
}

/** GETs `path` with the page's token (reads; writes go through `server()`). */
async function read(path) {
    const headers = { Accept: "application/json" };
    if (tokenInput.value) headers.Authorization = `Bearer ${tokenInput.value}`;
    const response = await fetch(path, { headers });
    const text = await response.text();
    const json = text ? JSON.parse(text) : null;
    if (!response.ok) throw new Error(`GET ${path}: ${response.status} ${json?.error?.message ?? ""}`);
    return json;
}

/** Writes go through the client's `writer`, with the token the page was given. */
const server = () => writer(location.origin, { token: tokenInput.value || undefined });

const viewPath = (name) => `/v1/views/${encodeURIComponent(name)}`;

async function mutate(ops) {
    showError(null);
    try {
        return await server().mutate(current.name, ops);
    } catch (error) {
        showError(error.message);
    }
}

async function replace(sections) {
    showError(null);
    try {
        return await server().replace(current.name, sections);
    } catch (error) {
        showError(error.message);
    }
}

function sampleSections() {
    const titles = ["Today", "This week", "Later"];
    return titles.map((title, s) => ({
        id: ["today", "week", "later"][s],
        data: { title },
        items: Array.from({ length: 3 + randomIndex(4) }, () => ({ id: newId("m"), data: task() })),
    }));
}

function open(name, kind = "collection") {
    subscription?.unsubscribe();
    current = { kind, name, source: null, sections: [], version: null };
    document.body.dataset.kind = kind;
    if (kind === "collection") nameInput.value = name;
    $("#title").textContent = name;
    document.title = `${name} · ChangeServer live demo`;
    const url = new URL(location.href);
    url.searchParams.delete(kind === "view" ? "collection" : "view");
    url.searchParams.set(kind, name);
    history.replaceState(null, "", url);
    if (kind === "view") loadDefinition(name);
    const generation = ++opened;
    const mine = (handler) => (...args) => {
        if (generation === opened) handler(...args);
    };
    log.replaceChildren();
    list.render([]);
    setVersion(null);
    subscription = subscribe(
        location.origin,
        name,
        {
            onSnapshot: mine(({ sections, version }) => {
                current.sections = sections;
                list.render(sections);
                setVersion(version);
                addLog(`${version}: snapshot, ${sections.length} sections, ${sections.reduce((n, s) => n + s.items.length, 0)} items`);
            }),
            onChangeset: mine(({ changeset, sections, from, to }) => {
                current.sections = sections;
                list.apply(changeset, sections);
                setVersion(to);
                addLog(`${from} → ${to}: ${summary(changeset)}`);
            }),
            onStatus: mine((status, detail) => {
                setStatus(status, detail);
                if (status === "reset") addLog(`start over (${detail?.reason ?? "410"})`);
                if (status === "missing") list.render([]);
            }),
            onError(error) {
                console.warn("changefeed:", error);
            },
        },
        {
            token: tokenInput.value || undefined,
            baseMs: 250,
            capMs: 5000,
            missingRetryMs: 1000,
            kind,
        }
    );
    window.demo.subscription = subscription;
}

/** A view's source and sort order, for its controls. */
async function loadDefinition(name) {
    try {
        const { definition } = await read(viewPath(name));
        if (current.name !== name) return;
        current.source = definition.source;
        nameInput.value = definition.source;
        $("#title").textContent = `${name} · ${definition.source} by ${definition.sectionBy?.field ?? "nothing"}`;
        const sort = Object.keys(sortOrders).find(
            (key) => JSON.stringify(sortOrders[key].map(({ field, order }) => ({ field, order: order ?? "asc" }))) ===
                JSON.stringify(definition.sortBy ?? [])
        );
        if (sort) viewSort.value = sort;
    } catch (error) {
        // A view that does not exist yet: the feed reports it as missing and the page waits for it.
        console.info("view definition:", error.message);
    }
}

/** Defines (or redefines) `name` as the items of `source` grouped by status and sorted as the control says. */
async function defineView(name, source) {
    showError(null);
    try {
        return await server().defineView(name, {
            source,
            sectionBy: { field: "/status" },
            sortBy: sortOrders[viewSort.value] ?? sortOrders["priority-desc"],
        });
    } catch (error) {
        showError(error.message);
    }
}

/** Writes one item of the view's source (views are written only through their source). */
async function putSourceItem(id, data) {
    showError(null);
    if (!current.source) return showError("the view's source is not known yet");
    try {
        return await server().upsert(current.source, id, { data });
    } catch (error) {
        showError(error.message);
    }
}

async function deleteSourceItem(id) {
    showError(null);
    try {
        return await server().deleteItem(current.source, id);
    } catch (error) {
        showError(error.message);
    }
}

const nextStatus = (status) => statuses[(statuses.indexOf(status) + 1) % statuses.length];
const objectData = (data) => (data !== null && typeof data === "object" && !Array.isArray(data) ? data : { text: itemLabel(data) });

const viewActions = {
    priority: () => {
        const items = allItems();
        if (!items.length) return;
        const { item } = pick(items);
        const old = item.data?.priority;
        const choices = [1, 2, 3, 4, 5].filter((priority) => priority !== old);
        return putSourceItem(item.id, { ...objectData(item.data), priority: pick(choices) });
    },
    status: () => {
        const items = allItems();
        if (!items.length) return;
        const { item } = pick(items);
        const choices = statuses.filter((status) => status !== item.data?.status);
        return putSourceItem(item.id, { ...objectData(item.data), status: pick(choices) });
    },
    insert: () => putSourceItem(newId("t"), task()),
};

async function refreshCollections() {
    try {
        const { collections } = await read("/v1/collections");
        $("#collections").replaceChildren(
            ...collections.map((collection) => {
                const option = document.createElement("option");
                option.value = collection.name;
                option.label = `${collection.sections} sections, ${collection.items} items`;
                return option;
            })
        );
        return collections;
    } catch {
        return [];
    }
}

const allItems = () => current.sections.flatMap((section, s) => section.items.map((item, i) => ({ item, s, i })));

const actions = {
    "insert-item": () => {
        if (!current.sections.length) return replace([{ id: "default", data: { title: "Items" }, items: [{ id: newId("m"), data: task() }] }]);
        const s = randomIndex(current.sections.length);
        return mutate([{ op: "insertItems", at: [s, randomIndex(current.sections[s].items.length + 1)], items: [{ id: newId("m"), data: task() }] }]);
    },
    "delete-item": () => {
        const items = allItems();
        if (items.length) return mutate([{ op: "deleteItems", items: [pick(items).item.id] }]);
    },
    "move-item": () => {
        const items = allItems();
        if (!items.length) return;
        const s = randomIndex(current.sections.length);
        const { item, s: from } = pick(items);
        const count = current.sections[s].items.length - (from === s ? 1 : 0);
        return mutate([{ op: "moveItem", item: item.id, to: [s, randomIndex(count + 1)] }]);
    },
    "update-item": () => {
        const items = allItems();
        if (!items.length) return;
        const { item } = pick(items);
        return mutate([{ op: "updateItems", items: [{ id: item.id, data: { ...objectData(item.data), text: phrase() } }] }]);
    },
    "insert-section": () =>
        mutate([{ op: "insertSections", at: randomIndex(current.sections.length + 1), sections: [{ id: newId("s"), data: { title: pick(words) }, items: [{ id: newId("m"), data: task() }] }] }]),
    "delete-section": () => {
        if (current.sections.length) return mutate([{ op: "deleteSections", sections: [randomIndex(current.sections.length)] }]);
    },
    "move-section": () => {
        if (current.sections.length > 1) return mutate([{ op: "moveSection", section: randomIndex(current.sections.length), to: randomIndex(current.sections.length) }]);
    },
    "update-section": () => {
        if (current.sections.length) return mutate([{ op: "updateSection", section: randomIndex(current.sections.length), data: { title: pick(words) } }]);
    },
    shuffle: () => {
        const items = allItems().map(({ item }) => item);
        for (let k = items.length - 1; k > 0; k -= 1) {
            const j = randomIndex(k + 1);
            [items[k], items[j]] = [items[j], items[k]];
        }
        const sections = current.sections.map((section) => ({ id: section.id, data: section.data, items: [] }));
        items.forEach((item, k) => sections[k % sections.length].items.push(item));
        return replace(sections);
    },
    replace: () => replace(sampleSections()),
    clear: () => replace(current.sections.map((section) => ({ id: section.id, data: section.data, items: [] }))),
    burst: async () => {
        const kinds = ["insert-item", "insert-item", "delete-item", "move-item", "move-item", "update-item", "move-section", "update-section"];
        for (let k = 0; k < 10; k += 1) await actions[pick(kinds)]();
    },
};

document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button) {
        actions[button.dataset.action]?.();
        return;
    }
    const viewButton = event.target.closest("button[data-view-action]");
    if (viewButton) {
        viewActions[viewButton.dataset.viewAction]?.();
        return;
    }
    const rowButton = event.target.closest("button[data-row-action]");
    const row = rowButton?.closest(".cf-item[data-id]");
    if (!row) return;
    const id = row.dataset.id;
    const found = allItems().find(({ item }) => item.id === id);
    if (!found) return;
    if (current.kind === "view") {
        const data = objectData(found.item.data);
        const priority = typeof data.priority === "number" ? data.priority : 0;
        if (rowButton.dataset.rowAction === "row-up") putSourceItem(id, { ...data, priority: priority + 1 });
        if (rowButton.dataset.rowAction === "row-edit") putSourceItem(id, { ...data, status: nextStatus(data.status) });
        if (rowButton.dataset.rowAction === "row-delete") deleteSourceItem(id);
        return;
    }
    if (rowButton.dataset.rowAction === "row-delete") mutate([{ op: "deleteItems", items: [id] }]);
    if (rowButton.dataset.rowAction === "row-edit") mutate([{ op: "updateItems", items: [{ id, data: { ...objectData(found.item.data), text: phrase() } }] }]);
    if (rowButton.dataset.rowAction === "row-up") {
        const { s, i } = found;
        if (i > 0) mutate([{ op: "moveItem", item: id, to: [s, i - 1] }]);
        else if (s > 0) mutate([{ op: "moveItem", item: id, to: [s - 1, current.sections[s - 1].items.length] }]);
    }
});

$("#picker").addEventListener("submit", (event) => {
    event.preventDefault();
    if (nameInput.reportValidity()) open(nameInput.value.trim());
});

async function createSample(name) {
    current.name = name;
    showError(null);
    try {
        await server().replace(name, sampleSections());
    } catch (error) {
        showError(error.message);
    }
}

$("#create").addEventListener("click", async () => {
    if (!nameInput.reportValidity()) return;
    const name = nameInput.value.trim();
    await createSample(name);
    open(name);
    refreshCollections();
});
$("#create-missing").addEventListener("click", () => createSample(current.name));
$("#open-view").addEventListener("click", async () => {
    if (current.kind !== "collection" || !current.name) return;
    const name = `${current.name.slice(0, 118)}.by-status`;
    if (await defineView(name, current.name)) open(name, "view");
});
$("#open-source").addEventListener("click", () => {
    if (current.kind === "view" && current.source) open(current.source);
});
// Switching the sort redefines the view: the server answers the changeset (every row that changes place moves).
viewSort.addEventListener("change", () => {
    if (current.kind === "view" && current.source) defineView(current.name, current.source);
});
tokenInput.value = sessionStorage.getItem("changeserver-token") ?? "";
tokenInput.addEventListener("change", () => {
    sessionStorage.setItem("changeserver-token", tokenInput.value);
    if (current.name) open(current.name, current.kind);
});

window.demo = {
    open,
    actions,
    viewActions,
    get kind() {
        return current.kind;
    },
    get sections() {
        return current.sections;
    },
    get version() {
        return current.version;
    },
    subscription: null,
    /** Every status the feed went through, for tests and the curious. */
    statuses: [],
};

const parameters = new URLSearchParams(location.search);
const collections = await refreshCollections();
if (parameters.get("view")) open(parameters.get("view"), "view");
else if (parameters.get("collection")) open(parameters.get("collection"));
else nameInput.value = collections[0]?.name ?? "demo";
