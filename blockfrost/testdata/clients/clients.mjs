// Runs Blockfrost's own clients against a service: node clients.mjs SAMPLE.json
// prints, as one JSON object, what each client read for the sample's
// addresses, credentials, units, out-refs, accounts, scripts and datums,
// plus the hashes the clients' own libraries compute of the scripts and
// datums they received. blockfrost/testdata/clients is installed by npm ci
// from its package-lock.json; cmd/utxo-cache's TestBlockfrostClients runs
// this script and checks every answer.
import { readFileSync } from "node:fs";
import { BlockFrostAPI } from "@blockfrost/blockfrost-js";
import {
  Lucid,
  Blockfrost,
  PROTOCOL_PARAMETERS_DEFAULT,
  validatorToScriptHash,
  datumToHash,
} from "@lucid-evolution/lucid";
import { BlockfrostProvider } from "@meshsdk/core";

const sample = JSON.parse(readFileSync(process.argv[2], "utf8"));
const big = (_, v) => (typeof v === "bigint" ? v.toString() : v);

// A read that fails is reported, not thrown: the Go test says which.
async function attempt(fn) {
  try {
    return { ok: await fn() };
  } catch (e) {
    return { error: String(e && (e.message || e)), status: (e && e.status_code) || null };
  }
}

// lucidUtxo keeps what the Go test compares of a Lucid UTxO, and the
// hashes Lucid's own libraries compute of its script and datum.
function lucidUtxo(u) {
  return {
    txHash: u.txHash,
    outputIndex: u.outputIndex,
    address: u.address,
    assets: u.assets,
    datumHash: u.datumHash ?? null,
    datum: u.datum ?? null,
    datumHashComputed: u.datum ? datumToHash(u.datum) : null,
    scriptType: u.scriptRef ? u.scriptRef.type : null,
    scriptHashComputed: u.scriptRef ? validatorToScriptHash(u.scriptRef) : null,
  };
}

const out = { blockfrostjs: {}, lucid: {}, mesh: {} };

// blockfrost-js, customBackend.
{
  const api = new BlockFrostAPI({ customBackend: sample.url, rateLimiter: false });
  const o = out.blockfrostjs;
  o.addresses = {};
  for (const a of sample.addresses) o.addresses[a] = await attempt(() => api.addressesUtxosAll(a));
  o.addressInfo = {};
  for (const a of sample.addresses) o.addressInfo[a] = await attempt(() => api.addresses(a));
  o.units = [];
  for (const u of sample.units) o.units.push(await attempt(() => api.addressesUtxosAssetAll(u.address, u.unit)));
  o.accounts = {};
  for (const s of sample.stakeAddresses) o.accounts[s] = await attempt(() => api.accountsUtxosAll(s));
  o.txs = {};
  for (const r of sample.outRefs) o.txs[r.txHash] = await attempt(() => api.txsUtxos(r.txHash));
  o.latest = await attempt(() => api.blocksLatest());
  o.scripts = {};
  for (const h of sample.scriptHashes) {
    o.scripts[h] = {
      info: await attempt(() => api.scriptsByHash(h)),
      cbor: await attempt(() => api.scriptsCbor(h)),
      json: await attempt(() => api.scriptsJson(h)),
    };
  }
  o.datums = {};
  for (const h of sample.datumHashes) o.datums[h] = await attempt(() => api.scriptsDatumCbor(h));
  o.page2 = await attempt(() => api.addressesUtxos(sample.pagedAddress, { page: 2, count: 3, order: "desc" }));
  o.missing = await attempt(() => api.scriptsDatumCbor("00".repeat(32)));
}

// Lucid Evolution's Blockfrost provider, protocol parameters preset.
{
  const lucid = await Lucid(new Blockfrost(sample.url, "any"), "Preview", {
    presetProtocolParameters: PROTOCOL_PARAMETERS_DEFAULT,
  });
  const o = out.lucid;
  o.addresses = {};
  for (const a of sample.addresses) o.addresses[a] = await attempt(async () => (await lucid.utxosAt(a)).map(lucidUtxo));
  o.credentials = {};
  for (const c of sample.credentials) {
    o.credentials[c.hash] = await attempt(async () => (await lucid.utxosAt({ type: c.type, hash: c.hash })).map(lucidUtxo));
  }
  o.units = [];
  for (const u of sample.units) o.units.push(await attempt(async () => (await lucid.utxosAtWithUnit(u.address, u.unit)).map(lucidUtxo)));
  o.outRefs = await attempt(async () => (await lucid.utxosByOutRef(sample.outRefs)).map(lucidUtxo));
  o.datums = {};
  for (const h of sample.datumHashes) {
    // A UTxO that names its datum by hash only: datumOf fetches it.
    // datumOf decodes the datum it fetched into Plutus data; the
    // provider's getDatum, which it calls, gives the CBOR to check.
    o.datums[h] = await attempt(async () => {
      const data = await lucid.datumOf({ txHash: "00".repeat(32), outputIndex: 0, address: sample.addresses[0], assets: {}, datumHash: h });
      if (data === undefined || data === null) throw new Error("datumOf gave nothing");
      return await lucid.config().provider.getDatum(h);
    });
  }
  o.unknownAddress = await attempt(async () => (await lucid.utxosAt(sample.emptyAddress)).map(lucidUtxo));
}

// Mesh's BlockfrostProvider, pointed at the service's base URL.
{
  const mesh = new BlockfrostProvider(sample.url);
  const o = out.mesh;
  o.addresses = {};
  for (const a of sample.addresses) o.addresses[a] = await attempt(() => mesh.fetchAddressUTxOs(a));
  o.units = [];
  for (const u of sample.units) o.units.push(await attempt(() => mesh.fetchAddressUTxOs(u.address, u.unit)));
}

process.stdout.write(JSON.stringify(out, big));
