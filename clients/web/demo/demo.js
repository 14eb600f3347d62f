// The live demo: follows one collection with changefeed.js and changes it through the REST API.
import { itemLabel, renderList, sectionLabel, subscribe } from "/v1/client/changefeed.js";

const $ = (selector) => document.querySelector(selector);
const nameInput = $("#collection-name");
const tokenInput = $("#token");
const statusOutput = $("#status");
const errorLine = $("#error");
const log = $("#log");
const fieldsets = ["#actions", "#section-actions", "#list-actions"].map($);

const words = ("amber birch cedar dune ember fjord grove harbor iris juniper kelp lagoon meadow nectar orchid pebble " +
    "quartz river sage tundra umber valley willow yarrow zephyr").split(" ");
const pick = (list) => list[Math.floor(Math.random() * list.length)];
const randomIndex = (count) => Math.floor(Math.random() * count);
const newId = (prefix) => `${prefix}${Date.now().toString(36).slice(-4)}${Math.random().toString(36).slice(2, 6)}`;
const phrase = () => `${pick(words)} ${pick(words)}`;

let subscription = null;
let list = null;
let current = { name: null, sections: [], version: null };

const list$ = $("#list");
list = renderList(list$, {
    empty: "This collection has no items yet: insert one.",
    renderItem(item, element) {
        const text = document.createElement("span");
        text.className = "item-text";
        text.textContent = itemLabel(item.data);
        const id = document.createElement("code");
        id.className = "item-id";
        id.textContent = item.id;
        const actions = document.createElement("span");
        actions.className = "row-actions";
        for (const [action, label, title] of [["row-up", "▲", "Move up"], ["row-edit", "✎", "Update"], ["row-delete", "✕", "Delete"]]) {
            const button = document.createElement("button");
            button.type = "button";
            button.dataset.rowAction = action;
            button.title = title;
            button.textContent = label;
            actions.append(button);
        }
        element.replaceChildren(text, id, actions);
    },
    renderHeader(section, element) {
        const title = document.createElement("span");
        title.className = "section-title";
        title.textContent = sectionLabel(section);
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
    const usable = status === "live";
    for (const fieldset of fieldsets) fieldset.disabled = !usable;
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

function headers() {
    const result = { "Content-Type": "application/json", Accept: "application/json" };
    if (tokenInput.value) result.Authorization = `Bearer ${tokenInput.value}`;
    return result;
}

async function api(method, path, body) {
    const response = await fetch(path, { method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    const json = text ? JSON.parse(text) : null;
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${json?.error?.message ?? ""}`);
    return json;
}

const collectionPath = () => `/v1/collections/${encodeURIComponent(current.name)}`;

async function mutate(ops) {
    showError(null);
    try {
        return await api("POST", `${collectionPath()}/mutations`, { ops });
    } catch (error) {
        showError(error.message);
    }
}

async function replace(sections) {
    showError(null);
    try {
        return await api("PUT", collectionPath(), { sections });
    } catch (error) {
        showError(error.message);
    }
}

function sampleSections() {
    const titles = ["Today", "This week", "Later"];
    return titles.map((title, s) => ({
        id: ["today", "week", "later"][s],
        data: { title },
        items: Array.from({ length: 3 + randomIndex(4) }, () => ({ id: newId("m"), data: { text: phrase() } })),
    }));
}

function open(name) {
    subscription?.unsubscribe();
    current = { name, sections: [], version: null };
    nameInput.value = name;
    $("#title").textContent = name;
    document.title = `${name} · ChangeServer live demo`;
    const url = new URL(location.href);
    url.searchParams.set("collection", name);
    history.replaceState(null, "", url);
    log.replaceChildren();
    list.render([]);
    setVersion(null);
    subscription = subscribe(
        location.origin,
        name,
        {
            onSnapshot({ sections, version }) {
                current.sections = sections;
                list.render(sections);
                setVersion(version);
                addLog(`${version}: snapshot, ${sections.length} sections, ${sections.reduce((n, s) => n + s.items.length, 0)} items`);
            },
            onChangeset({ changeset, sections, from, to }) {
                current.sections = sections;
                list.apply(changeset, sections);
                setVersion(to);
                addLog(`${from} → ${to}: ${summary(changeset)}`);
            },
            onStatus(status, detail) {
                setStatus(status, detail);
                if (status === "reset") addLog(`start over (${detail?.reason ?? "410"})`);
                if (status === "missing") list.render([]);
            },
            onError(error) {
                console.warn("changefeed:", error);
            },
        },
        { token: tokenInput.value || undefined, baseMs: 250, capMs: 5000, missingRetryMs: 1000 }
    );
    window.demo.subscription = subscription;
}

async function refreshCollections() {
    try {
        const { collections } = await api("GET", "/v1/collections");
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
        if (!current.sections.length) return replace([{ id: "default", data: { title: "Items" }, items: [{ id: newId("m"), data: { text: phrase() } }] }]);
        const s = randomIndex(current.sections.length);
        return mutate([{ op: "insertItems", at: [s, randomIndex(current.sections[s].items.length + 1)], items: [{ id: newId("m"), data: { text: phrase() } }] }]);
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
        if (items.length) return mutate([{ op: "updateItems", items: [{ id: pick(items).item.id, data: { text: phrase() } }] }]);
    },
    "insert-section": () =>
        mutate([{ op: "insertSections", at: randomIndex(current.sections.length + 1), sections: [{ id: newId("s"), data: { title: pick(words) }, items: [{ id: newId("m"), data: { text: phrase() } }] }] }]),
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
    const rowButton = event.target.closest("button[data-row-action]");
    const row = rowButton?.closest(".cf-item[data-id]");
    if (!row) return;
    const id = row.dataset.id;
    const found = allItems().find(({ item }) => item.id === id);
    if (!found) return;
    if (rowButton.dataset.rowAction === "row-delete") mutate([{ op: "deleteItems", items: [id] }]);
    if (rowButton.dataset.rowAction === "row-edit") mutate([{ op: "updateItems", items: [{ id, data: { text: phrase() } }] }]);
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
        await api("PUT", `/v1/collections/${encodeURIComponent(name)}`, { sections: sampleSections() });
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
tokenInput.value = sessionStorage.getItem("changeserver-token") ?? "";
tokenInput.addEventListener("change", () => {
    sessionStorage.setItem("changeserver-token", tokenInput.value);
    if (current.name) open(current.name);
});

window.demo = {
    open,
    actions,
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

const requested = new URLSearchParams(location.search).get("collection");
const collections = await refreshCollections();
if (requested) open(requested);
else nameInput.value = collections[0]?.name ?? "demo";
