// Starts a real lightning-store server for the tests and the benchmark: the
// binary listens on an ephemeral loopback port (`--listen 127.0.0.1:0`), and
// the bound address is read from its JSON log, so no port is guessed.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** A running server process. */
export interface LocalServer {
  /** `127.0.0.1:port` of its gRPC listener. */
  readonly address: string;
  /** Its process id. */
  readonly pid: number;
  /** Sends SIGTERM and resolves with the exit code once it exited (SIGKILL after `timeoutMs`). */
  stop(timeoutMs?: number): Promise<number | null>;
}

/** The repository's root, seen from this file (in `src/` or `dist/src/`). */
function repositoryRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(resolve(dir, "Cargo.toml"))) {
    const parent = dirname(dir);
    if (parent === dir) {
      throw new Error("cannot find the repository root (Cargo.toml) above this example");
    }
    dir = parent;
  }
  return dir;
}

/** The server binary: `$LIGHTNING_STORE_BIN`, else the repository's debug build. */
export function serverBinary(): string {
  const binary =
    process.env["LIGHTNING_STORE_BIN"] ?? resolve(repositoryRoot(), "target/debug/lightning-store");
  if (!existsSync(binary)) {
    throw new Error(`no server binary at ${binary}: run \`cargo build\` or set LIGHTNING_STORE_BIN`);
  }
  return binary;
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve(child.exitCode);
  }
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

/**
 * Starts `binary serve --listen 127.0.0.1:0 --log-format json` plus `args`
 * (for example `["--store", "memory"]`) and resolves once it serves.
 */
export async function startServer(
  args: string[],
  options: { binary?: string; startTimeoutMs?: number } = {},
): Promise<LocalServer> {
  const binary = options.binary ?? serverBinary();
  const child = spawn(binary, ["serve", "--listen", "127.0.0.1:0", "--log-format", "json", ...args], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  // A test process that dies without stop() takes its server along.
  const killOnExit = (): void => {
    child.kill("SIGKILL");
  };
  process.once("exit", killOnExit);
  child.once("exit", () => process.removeListener("exit", killOnExit));
  const stop = async (timeoutMs = 15_000): Promise<number | null> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
      const code = await exited(child);
      clearTimeout(killer);
      return code;
    }
    return child.exitCode;
  };
  const log: string[] = [];
  const address = await new Promise<string>((resolveAddress, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`the server did not start within ${options.startTimeoutMs ?? 30_000} ms:\n${log.join("\n")}`));
    }, options.startTimeoutMs ?? 30_000);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited with ${code} before serving:\n${log.join("\n")}`));
    });
    const lines = createInterface({ input: child.stderr! });
    lines.on("line", (line) => {
      if (log.length < 200) {
        log.push(line);
      }
      try {
        const entry = JSON.parse(line) as { fields?: { message?: string; local_addr?: string } };
        if (entry.fields?.message?.startsWith("serving gRPC") === true && entry.fields.local_addr !== undefined) {
          clearTimeout(timer);
          resolveAddress(entry.fields.local_addr);
        }
      } catch {
        // not a JSON log line
      }
    });
  }).catch(async (error: unknown) => {
    await stop(1_000);
    throw error;
  });
  return { address, pid: child.pid ?? 0, stop };
}
