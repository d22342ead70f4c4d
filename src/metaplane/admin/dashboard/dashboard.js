// The live dashboard of `metaplane serve`: brokers, the leader, topics with their owners and
// backlogs, the last analysis, and a feed of every change. It follows the admin API's event
// stream (server-sent events, read with fetch so that a bearer token can go with it) and
// reads the cluster again after each change; a broken stream resumes from its last revision.
"use strict";

const API = "/admin/v2";
const FEED_SIZE = 60;
const REFRESH_DELAY = 120; // ms: the changes of a burst are read once
const state = { token: sessionStorage.getItem("metaplane-token") || "", lastId: null, timer: null };

function $(selector) { return document.querySelector(selector); }

function element(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value !== null && value !== undefined) node.setAttribute(name, String(value));
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function headers(extra) {
  const found = Object.assign({}, extra || {});
  if (state.token) found.Authorization = "Bearer " + state.token;
  return found;
}

class Unauthorized extends Error {}

async function read(path) {
  const response = await fetch(API + path, { headers: headers() });
  if (response.status === 401 || response.status === 403) throw new Unauthorized(path);
  if (!response.ok) throw new Error(path + ": HTTP " + response.status);
  return response.json();
}

function askForToken() {
  $("#login").hidden = false;
  $("#token").focus();
}

$("#login").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("#token").value.trim();
  sessionStorage.setItem("metaplane-token", state.token);
  $("#login").hidden = true;
  refresh();
  follow();
});

// The cluster ----------------------------------------------------------------------------

function showStatus(status) {
  const leader = status.leader;
  $("#leader").replaceChildren("leader: ", leader
    ? element("b", {}, `★ ${leader.broker_id} (epoch ${leader.epoch})`)
    : element("b", { class: "dead" }, "none"));
  const store = status.store;
  $("#store").replaceChildren("store: ", store.healthy
    ? element("b", {}, `answers in ${store.latency_ms} ms`)
    : element("b", { class: "dead" }, "does not answer"));
  $("#brokers-count").textContent = `${status.live_brokers} live of ${status.brokers.length}`;
  const rows = status.brokers.map((broker) => {
    const load = broker.load || {};
    const stateText = broker.state ? `${broker.state.mode}: ${broker.state.reason}` : "—";
    const id = element("td", {}, String(broker.broker_id));
    if (broker.leader) id.append(element("span", { class: "leader" }, " ★"));
    return element("tr", { "data-broker": broker.broker_id, "data-live": broker.live },
      id,
      element("td", { class: "live" }, broker.live ? "live" : "not live"),
      element("td", {}, stateText),
      element("td", { class: "num" }, broker.topics_owned),
      element("td", { class: "num" }, load.cpu ?? "—"),
      element("td", { class: "num" }, load.memory ?? "—"),
      element("td", {}, broker.addresses ? broker.addresses.broker_addr : "—"));
  });
  $("#brokers tbody").replaceChildren(...rows);
  const waiting = status.unassigned.length;
  $("#unassigned").textContent = waiting ? `${waiting} topic(s) waiting for assignment` : "every topic is assigned";
}

function topicRow(topic) {
  let owner = "waiting";
  let ownerClass = "";
  if (topic.owner !== null) {
    owner = `broker ${topic.owner}` + (topic.owner_live ? "" : " (not live)");
    ownerClass = topic.owner_live ? "" : "dead";
  } else if (topic.partitions > 0) {
    owner = `${topic.partitions} partitions`;
  }
  const subscriptions = topic.subscriptions
    .map((sub) => `${sub.subscription} (${sub.backlog ?? "?"})`).join(", ") || "—";
  const text = [topic.topic, owner, subscriptions].join(" ").toLowerCase();
  return element("tr", { "data-topic": topic.topic, "data-search": text },
    element("td", {}, topic.topic),
    element("td", { class: ownerClass }, owner),
    element("td", {}, subscriptions),
    element("td", { class: "num" }, topic.backlog.toLocaleString("en")));
}

function showTopics(overview) {
  $("#topics tbody").replaceChildren(...overview.topics.map(topicRow));
  $("#topics-count").textContent = `${overview.topics.length}`;
  $("#revision").replaceChildren("revision ", element("b", {}, overview.revision));
  filterTopics();
  showAnalysis(overview.analysis);
}

function filterTopics() {
  const words = $("#search").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  for (const row of $("#topics tbody").children) {
    const text = row.getAttribute("data-search");
    row.hidden = !words.every((word) => text.includes(word));
  }
}

$("#search").addEventListener("input", filterTopics);

function showAnalysis(summary) {
  $("#analysis-section").hidden = !summary;
  if (!summary) return;
  $("#analysis-revision").textContent = `of revision ${summary.snapshot.revision}`;
  const audit = summary.audit;
  const severities = Object.entries(audit.severities).map(([name, count]) => `${count} ${name}`).join(", ");
  const plan = summary.rebalance;
  const facts = [
    ["audit", `${audit.findings} findings${severities ? " (" + severities + ")" : ""}`],
    ["backlog", `${summary.backlog.messages.toLocaleString("en")} messages`],
    ["storage", `${summary.storage.bytes.toLocaleString("en")} bytes in ${summary.storage.objects} objects`],
    ["retention plan", `${summary.retention.objects} objects, ${summary.retention.bytes.toLocaleString("en")} bytes`],
    ["rebalance plan", `${plan.moves} moves, cv ${plan.balance_before.cv} → ${plan.balance_after.cv}`],
  ];
  $("#analysis").replaceChildren(...facts.flatMap(([name, value]) => [element("dt", {}, name), element("dd", {}, value)]));
}

async function refresh() {
  try {
    const [status, overview] = await Promise.all([read("/status"), read("/overview")]);
    showStatus(status);
    showTopics(overview);
  } catch (error) {
    if (error instanceof Unauthorized) askForToken();
    else setStream("reconnecting", "the server does not answer");
  }
}

function soon() {
  if (state.timer !== null) return;
  state.timer = setTimeout(() => { state.timer = null; refresh(); }, REFRESH_DELAY);
}

// The event stream -----------------------------------------------------------------------

function setStream(name, text) {
  const node = $("#stream");
  node.setAttribute("data-state", name);
  node.textContent = text;
}

function addToFeed(change) {
  const feed = $("#feed");
  for (const event of change.events) {
    const value = event.type === "PUT" && event.value !== undefined ? " = " + event.value.slice(0, 80) : "";
    feed.prepend(element("li", { class: event.type },
      `${change.revision} ${event.type.padEnd(6)} ${event.key}${value}`));
  }
  while (feed.children.length > FEED_SIZE) feed.lastElementChild.remove();
}

function handle(message) {
  if (message.event === "change") {
    state.lastId = message.id;
    addToFeed(JSON.parse(message.data));
    soon();
  } else if (message.event === "ready") {
    setStream("live", "live");
    soon();
  } else if (message.event === "compacted") {
    state.lastId = null; // that history is gone: read afresh, follow from now
    soon();
  }
}

function parse(block) {
  const message = { event: "message", data: "", id: null };
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") message.event = value;
    else if (field === "data") message.data += (message.data ? "\n" : "") + value;
    else if (field === "id") message.id = value;
  }
  return message;
}

async function follow() {
  for (let delay = 500; ; delay = Math.min(delay * 2, 5000)) {
    try {
      const extra = state.lastId ? { "Last-Event-ID": state.lastId } : {};
      const response = await fetch(API + "/events?prefix=/", { headers: headers(extra) });
      if (response.status === 401 || response.status === 403) { askForToken(); return; }
      if (!response.ok || !response.body) throw new Error("HTTP " + response.status);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          handle(parse(buffer.slice(0, end)));
          buffer = buffer.slice(end + 2);
        }
        delay = 500;
      }
    } catch (error) {
      // the server went away: said on the page, and tried again below
    }
    setStream("reconnecting", "reconnecting…");
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

refresh();
follow();
