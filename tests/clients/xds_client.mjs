#!/usr/bin/env node
// Proxyless gRPC xDS client (@grpc/grpc-js + @grpc/grpc-js-xds) for xdst integration tests.
//
//   NODE_PATH=$XDST_NODE_PATH GRPC_XDS_BOOTSTRAP_CONFIG='{...}' \
//     node xds_client.mjs --target xds:///echo --count 5 [--timeout 20] [--node-path DIR]
//
// Makes --count unary calls of /xdst.test.Echo/Say with payload "hello-<i>", each retried
// until one overall deadline (--timeout seconds from start) passes, and prints one JSON line:
//   {"ok": true, "replies": ["a:hello-0", ...], "error": ""}
// Exit status 0 only when all calls succeeded. The bootstrap comes from GRPC_XDS_BOOTSTRAP
// (a file) or GRPC_XDS_BOOTSTRAP_CONFIG (inline JSON); grpc-js-xds needs node.locality in it.
// The grpc modules are loaded from --node-path DIR (a node_modules dir or its parent),
// else through NODE_PATH / XDST_NODE_PATH. A target without the xds: scheme
// (e.g. 127.0.0.1:PORT) skips xDS; that is only for checking a backend directly.
import { createRequire } from 'node:module';
import path from 'node:path';

const METHOD = '/xdst.test.Echo/Say';
const RETRY_PAUSE_MS = 200;
// Each attempt gets its own deadline (1 s, then 2 s), within the overall one, as in
// xds_client.py: there a call queued before the xDS server is up can stay stuck after the
// config arrives; grpc-js has not shown that, but a fresh attempt costs nothing.
const ATTEMPT_TIMEOUTS_MS = [1000, 2000];

function parseArgs(argv) {
  const args = { target: 'xds:///echo', count: 5, timeout: 20, nodePath: null };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
      return argv[++i];
    };
    switch (flag) {
      case '--target': args.target = value(); break;
      case '--count': args.count = Number.parseInt(value(), 10); break;
      case '--timeout': args.timeout = Number.parseFloat(value()); break;
      case '--node-path': args.nodePath = value(); break;
      default: throw new Error(`unknown argument ${flag}`);
    }
  }
  if (!Number.isInteger(args.count) || args.count < 0) throw new Error('--count must be an integer >= 0');
  if (!(args.timeout > 0)) throw new Error('--timeout must be a number > 0');
  return args;
}

function loadGrpc(nodePath) {
  // A require rooted inside DIR searches DIR (when it is a node_modules dir), DIR/node_modules
  // and their parents; with no DIR, NODE_PATH (or XDST_NODE_PATH) is searched as usual.
  const dirs = [nodePath, process.env.XDST_NODE_PATH].filter(Boolean);
  const require = createRequire(
    dirs.length ? path.join(path.resolve(dirs[0]), '__xdst_client__.js') : import.meta.url,
  );
  const grpc = require('@grpc/grpc-js');
  require('@grpc/grpc-js-xds').register();
  return grpc;
}

function errorText(err) {
  if (err && typeof err.code === 'number') return err.message || `code ${err.code}`;
  return String(err && err.message ? err.message : err);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

async function run(args) {
  const startedAt = Date.now();
  const deadline = startedAt + args.timeout * 1000;
  const replies = [];
  if (args.target.startsWith('xds:')
      && !process.env.GRPC_XDS_BOOTSTRAP && !process.env.GRPC_XDS_BOOTSTRAP_CONFIG) {
    return { ok: false, replies, error: 'neither GRPC_XDS_BOOTSTRAP nor GRPC_XDS_BOOTSTRAP_CONFIG is set' };
  }
  const grpc = loadGrpc(args.nodePath);
  const identity = (b) => b;
  const Echo = grpc.makeGenericClientConstructor({
    Say: {
      path: METHOD,
      requestStream: false,
      responseStream: false,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
  }, 'Echo');
  const client = new Echo(args.target, grpc.credentials.createInsecure());
  const say = (payload, attemptDeadline) => new Promise((resolve, reject) => {
    const metadata = new grpc.Metadata({ waitForReady: true });
    client.Say(payload, metadata, { deadline: new Date(attemptDeadline) }, (err, reply) => {
      if (err) reject(err); else resolve(reply);
    });
  });
  try {
    for (let i = 0; i < args.count; i++) {
      const payload = Buffer.from(`hello-${i}`);
      let attempts = 0;
      let lastError = '';
      for (;;) {
        if (Date.now() >= deadline) {
          return {
            ok: false,
            replies,
            error: `call ${i} (hello-${i}): deadline of ${args.timeout}s passed after ${attempts} `
              + `attempt(s); last error: ${lastError || 'none'}; channel state: `
              + `${grpc.connectivityState[client.getChannel().getConnectivityState(false)]}`,
          };
        }
        const attemptMs = ATTEMPT_TIMEOUTS_MS[Math.min(attempts, ATTEMPT_TIMEOUTS_MS.length - 1)];
        attempts++;
        try {
          const reply = await say(payload, Math.min(deadline, Date.now() + attemptMs));
          replies.push(Buffer.from(reply).toString('utf8'));
          break;
        } catch (err) {
          lastError = errorText(err);
          await sleep(Math.min(RETRY_PAUSE_MS, deadline - Date.now()));
        }
      }
    }
    return { ok: true, replies, error: '' };
  } finally {
    client.close();
  }
}

let result;
try {
  result = await run(parseArgs(process.argv.slice(2)));
} catch (err) {
  result = { ok: false, replies: [], error: errorText(err) };
}
// The xDS client keeps timers alive; exit explicitly once the line is written.
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(result.ok ? 0 : 1));
