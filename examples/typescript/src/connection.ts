// How this example reaches a lightning-store server: the address, TLS on or
// off, the bearer token and the namespace live here and only here, so that both the store
// client (Connect over HTTP/2) and the OpenTelemetry exporter (grpc-js) pick
// up the same settings.

import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { credentials, Metadata } from "@grpc/grpc-js";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";

import { LightningStoreService } from "./gen/lightningstore/v1/store_pb.js";

/** Where the server is and how to talk to it. */
export interface ConnectionOptions {
  /** `host:port` of the server (gRPC, OTLP/gRPC and health share it). */
  address: string;
  /** Use TLS; extra CA certificates come from Node's `NODE_EXTRA_CA_CERTS`. */
  tls: boolean;
  /** Bearer token sent as `authorization` metadata on every call, if any. */
  token?: string | undefined;
  /** Accept gzip-compressed responses: less traffic on slow links, more CPU on both ends. */
  gzip?: boolean;
  /**
   * The namespace every call works in (one training among several on the
   * server), sent as `lightning-store-namespace` metadata on every call,
   * stream and span export; undefined: the `default` namespace.
   */
  namespace?: string | undefined;
}

/** The metadata key that names a call's namespace. */
export const NAMESPACE_METADATA = "lightning-store-namespace";

const NAMESPACE_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Returns `name` if it is a namespace name (a DNS label: 1 to 63 lowercase
 * letters, digits and hyphens, beginning and ending with a letter or a
 * digit); throws otherwise, before any call is made.
 */
export function checkNamespace(name: string): string {
  if (!NAMESPACE_NAME.test(name)) {
    throw new Error(
      `${JSON.stringify(name)} is not a namespace name: 1 to 63 lowercase letters, digits and hyphens, ` +
        "beginning and ending with a letter or a digit",
    );
  }
  return name;
}

/** The typed client of `lightningstore.v1.LightningStoreService`. */
export type StoreClient = Client<typeof LightningStoreService>;

/** The address used when neither an argument nor the environment names one. */
export const DEFAULT_ADDRESS = "127.0.0.1:4747";

function envFlag(name: string): boolean {
  const value = (process.env[name] ?? "").toLowerCase();
  return value === "1" || value === "true";
}

/**
 * Reads the options from the environment: `LIGHTNING_STORE_SERVER` (address,
 * optionally as `http://` or `https://` URL), `LIGHTNING_STORE_TLS` and
 * `LIGHTNING_STORE_GZIP` (`1` or `true`), `LIGHTNING_STORE_TOKEN` and
 * `LIGHTNING_STORE_NAMESPACE`. An explicit address or namespace wins over
 * the environment's.
 */
export function connectionFromEnv(address?: string, namespace?: string): ConnectionOptions {
  const raw = address ?? process.env["LIGHTNING_STORE_SERVER"] ?? DEFAULT_ADDRESS;
  let tls = envFlag("LIGHTNING_STORE_TLS");
  let hostPort = raw;
  if (raw.startsWith("https://")) {
    tls = true;
    hostPort = raw.slice("https://".length);
  } else if (raw.startsWith("http://")) {
    hostPort = raw.slice("http://".length);
  }
  const token = process.env["LIGHTNING_STORE_TOKEN"];
  const named = namespace ?? process.env["LIGHTNING_STORE_NAMESPACE"];
  return {
    address: hostPort.replace(/\/+$/, ""),
    tls,
    token: token === "" ? undefined : token,
    gzip: envFlag("LIGHTNING_STORE_GZIP"),
    namespace: named === undefined || named === "" ? undefined : checkNamespace(named),
  };
}

function baseUrl(options: ConnectionOptions): string {
  return `${options.tls ? "https" : "http"}://${options.address}`;
}

function authorization(options: ConnectionOptions): string | undefined {
  return options.token === undefined ? undefined : `Bearer ${options.token}`;
}

/**
 * Creates the store client: Connect's gRPC protocol over one multiplexed
 * HTTP/2 connection (unary calls and the bidirectional `WorkerSession`
 * alike). HTTP/2 pings every 30 s keep long-lived streams alive through
 * idle-connection reapers.
 */
export function createStoreClient(options: ConnectionOptions): StoreClient {
  const auth = authorization(options);
  const namespace = options.namespace === undefined ? undefined : checkNamespace(options.namespace);
  const interceptors: Interceptor[] = [];
  if (auth !== undefined) {
    interceptors.push((next) => (request) => {
      request.header.set("authorization", auth);
      return next(request);
    });
  }
  if (namespace !== undefined) {
    // Unary calls and streams alike (the WorkerSession, WatchRolloutCompletions, WatchEvents).
    interceptors.push((next) => (request) => {
      request.header.set(NAMESPACE_METADATA, namespace);
      return next(request);
    });
  }
  const transport = createGrpcTransport({
    baseUrl: baseUrl(options),
    interceptors,
    pingIntervalMs: 30_000,
    // Responses uncompressed unless asked for: the server gzips every
    // response a client accepts gzip for (Connect accepts gzip and br by
    // default), which on a local network costs both sides more CPU than the
    // bytes it saves (docs in the README).
    ...(options.gzip === true ? {} : { acceptCompression: [] }),
  });
  return createClient(LightningStoreService, transport);
}

/**
 * Creates the OpenTelemetry SDK's OTLP/gRPC span exporter aimed at the
 * store's own port (its `TraceService/Export`), with the same TLS setting,
 * token and namespace as the store client.
 */
export function createSpanExporter(options: ConnectionOptions): OTLPTraceExporter {
  const metadata = new Metadata();
  const auth = authorization(options);
  if (auth !== undefined) {
    metadata.set("authorization", auth);
  }
  if (options.namespace !== undefined) {
    metadata.set(NAMESPACE_METADATA, checkNamespace(options.namespace));
  }
  return new OTLPTraceExporter({
    url: baseUrl(options),
    credentials: options.tls ? credentials.createSsl() : credentials.createInsecure(),
    metadata,
  });
}
