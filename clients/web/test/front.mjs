// Test support: the shipped caches in front of a ChangeServer, started the way the README says (nginx through
// scripts/nginx-front.sh, Varnish with deploy/varnish/changeserver.vcl) on a free loopback port, stopped by PID.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repository = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** Whether a program is on PATH (or in /usr/sbin, where Debian puts nginx and varnishd). */
export function hasProgram(name) {
    return spawnSync("sh", ["-c", `command -v ${name} || test -x /usr/sbin/${name}`]).status === 0;
}

/** A loopback port nobody listens on right now. */
export async function freePort() {
    return new Promise((resolve, reject) => {
        const server = net.createServer();
        server.on("error", reject);
        server.listen(0, "127.0.0.1", () => {
            const { port } = server.address();
            server.close(() => resolve(port));
        });
    });
}

/**
 * Waits until `port` takes a connection, trying every millisecond: a script that listens before it serves (as
 * nginx-front.sh did, through `nginx -t`) is then caught by the first request after this returns.
 */
async function waitForPort(port, child, logOf, seconds = 20) {
    const deadline = Date.now() + seconds * 1000;
    while (Date.now() < deadline) {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the front exited: ${logOf()}`);
        const open = await new Promise((resolve) => {
            const socket = net.connect(port, "127.0.0.1");
            socket.on("connect", () => {
                socket.destroy();
                resolve(true);
            });
            socket.on("error", () => resolve(false));
        });
        if (open) return;
        await new Promise((resolve) => setTimeout(resolve, 1));
    }
    throw new Error(`the front did not listen in ${seconds} s: ${logOf()}`);
}

function frontHandle(child, port, directory, logOf) {
    const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));
    return {
        port,
        url: `http://127.0.0.1:${port}`,
        directory,
        get log() {
            return logOf();
        },
        /** SIGTERM to the PID this started, SIGKILL after 10 s; removes its directory. */
        async stop() {
            if (child.exitCode === null && child.signalCode === null) {
                child.kill("SIGTERM");
                const timer = setTimeout(() => child.kill("SIGKILL"), 10000);
                await exited;
                clearTimeout(timer);
            }
            if (!process.env.CF_KEEP_FRONT) rmSync(directory, { recursive: true, force: true });
        },
    };
}

/**
 * nginx with deploy/nginx/changeserver.conf in front of `upstreamPort`, through scripts/nginx-front.sh (with its
 * `options`, such as `--any-origin`).
 */
export async function startNginx(upstreamPort, options = []) {
    const port = await freePort();
    const directory = mkdtempSync(path.join(tmpdir(), "changeserver-nginx-"));
    const child = spawn(
        "bash",
        [path.join(repository, "scripts/nginx-front.sh"), "--upstream", `127.0.0.1:${upstreamPort}`,
            "--listen", `127.0.0.1:${port}`, "--dir", directory, ...options],
        { stdio: ["ignore", "pipe", "pipe"] }
    );
    let log = "";
    child.stdout.on("data", (chunk) => (log += chunk));
    child.stderr.on("data", (chunk) => (log += chunk));
    await waitForPort(port, child, () => log);
    const front = frontHandle(child, port, directory, () => log);
    /** The `count` slowest requests of nginx's access log so far (it is flushed every second), slowest first. */
    front.slowestRequests = (count) => {
        let lines = [];
        try {
            lines = readFileSync(path.join(directory, "logs/access.log"), "utf8").split("\n");
        } catch {
            return [];
        }
        const time = (line) => Number(/ time=([0-9.]+)/.exec(line)?.[1] ?? 0);
        return lines.filter((line) => line).sort((a, b) => time(b) - time(a)).slice(0, count);
    };
    return front;
}

/** Varnish with deploy/varnish/changeserver.vcl in front of `upstreamPort`, through scripts/varnish-front.sh. */
export async function startVarnish(upstreamPort) {
    const port = await freePort();
    const directory = mkdtempSync(path.join(tmpdir(), "changeserver-varnish-"));
    const child = spawn(
        "bash",
        [path.join(repository, "scripts/varnish-front.sh"), "--upstream", `127.0.0.1:${upstreamPort}`,
            "--listen", `127.0.0.1:${port}`, "--dir", directory],
        { stdio: ["ignore", "pipe", "pipe"] }
    );
    let log = "";
    child.stdout.on("data", (chunk) => (log += chunk));
    child.stderr.on("data", (chunk) => (log += chunk));
    await waitForPort(port, child, () => log);
    return frontHandle(child, port, directory, () => log);
}

/** The feed requests the server answered so far, from its /metrics. */
export async function originFeedRequests(serverURL) {
    const text = await (await fetch(`${serverURL}/metrics`)).text();
    let total = 0;
    for (const line of text.split("\n")) {
        if (line.startsWith("changeserver_requests_total{") && line.includes('route="/v1/collections/{name}/changes"')) {
            total += Number(line.split(" ").at(-1));
        }
    }
    return total;
}
