// Calls a node's Esplora front end through @mempool/mempool.js, as a wallet
// would, and prints what the client returned as JSON (node/esplora_test.go
// compares it with the node's /v1 answers and with facts it computes from
// the blocks). Usage: node check.js request.json
'use strict';
const fs = require('fs');
const mempoolJS = require('@mempool/mempool.js');

// outcome runs a client call and records its value, or the HTTP status and
// body of the error the client threw.
async function outcome(call) {
  try {
    return { value: await call() };
  } catch (e) {
    if (e.response) {
      return { status: e.response.status, body: String(e.response.data), contentType: e.response.headers['content-type'] };
    }
    return { thrown: String(e) };
  }
}

async function main() {
  const req = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const { bitcoin: { addresses, blocks, transactions } } = mempoolJS({ hostname: req.hostname, protocol: 'http', network: 'main' });
  const out = {
    tipHeight: await outcome(() => blocks.getBlocksTipHeight()),
    tipHash: await outcome(() => blocks.getBlocksTipHash()),
    utxo: {},
    address: {},
    outspend: [],
  };
  for (const address of req.addresses) {
    out.utxo[address] = await outcome(() => addresses.getAddressTxsUtxo({ address }));
    out.address[address] = await outcome(() => addresses.getAddress({ address }));
  }
  for (const [txid, vout] of req.outpoints) {
    out.outspend.push(await outcome(() => transactions.getTxOutspend({ txid, vout })));
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
