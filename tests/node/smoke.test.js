// Smoke test with the DataStax Node.js driver against SIBYL_HOST:SIBYL_PORT
// (scripts/smoke_node.sh HOST PORT): connect, CREATE KEYSPACE/TABLE, prepared
// insert and select, paging over 1000 rows.
const test = require('node:test');
const assert = require('node:assert');
const cassandra = require('cassandra-driver');

test('node driver: connect, DDL, prepared insert and select, paging', async () => {
  const host = process.env.SIBYL_HOST, port = Number(process.env.SIBYL_PORT);
  assert.ok(host && port, 'SIBYL_HOST and SIBYL_PORT must be set (use scripts/smoke_node.sh HOST PORT)');
  const client = new cassandra.Client({
    contactPoints: [`${host}:${port}`],
    localDataCenter: process.env.SIBYL_DC || 'datacenter1',
    socketOptions: { readTimeout: 30000 },
  });
  await client.connect();
  const ks = 'node_smoke_' + (Date.now() % 1000000000);
  try {
    const local = (await client.execute('SELECT release_version, partitioner FROM system.local')).first();
    assert.strictEqual(local.partitioner, 'org.apache.cassandra.dht.Murmur3Partitioner');
    await client.execute(`CREATE KEYSPACE ${ks} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`);
    await client.execute(`CREATE TABLE ${ks}.t (k int, c int, v text, PRIMARY KEY (k, c))`);
    const table = await client.metadata.getTable(ks, 't');
    assert.deepStrictEqual(table.partitionKeys.map((c) => c.name), ['k']);
    assert.deepStrictEqual(table.clusteringKeys.map((c) => c.name), ['c']);

    for (let i = 0; i < 1000; i++) {
      await client.execute(`INSERT INTO ${ks}.t (k, c, v) VALUES (?, ?, ?)`, [1, i, 'v' + i], { prepare: true });
    }
    const one = await client.execute(`SELECT v FROM ${ks}.t WHERE k = ? AND c = ?`, [1, 500], { prepare: true });
    assert.strictEqual(one.first().v, 'v500');

    // automatic paging: every row once, in clustering order
    let n = 0;
    for await (const row of client.stream(`SELECT c, v FROM ${ks}.t WHERE k = ?`, [1], { prepare: true, fetchSize: 100 })) {
      assert.strictEqual(row.c, n);
      assert.strictEqual(row.v, 'v' + n);
      n++;
    }
    assert.strictEqual(n, 1000);

    // manual paging with the page state: 10 pages of 100
    let pageState, pages = 0, rows = 0;
    do {
      const rs = await client.execute(`SELECT c FROM ${ks}.t WHERE k = ?`, [1], { prepare: true, fetchSize: 100, pageState });
      for (const row of rs.rows) {
        assert.strictEqual(row.c, rows);
        rows++;
      }
      if (rs.rows.length > 0) pages++;
      pageState = rs.pageState;
    } while (pageState);
    assert.strictEqual(pages, 10);
    assert.strictEqual(rows, 1000);
  } finally {
    await client.execute(`DROP KEYSPACE IF EXISTS ${ks}`);
    await client.shutdown();
  }
});

// Against a cluster (SIBYL_EXPECT_NODES=N, SIBYL_DC): the driver discovers
// every node from one contact point, in its data center, all up, and its
// token map places keys where the nodes say (SIBYL_ENDPOINTS_CMD prints a
// key's replicas, e.g. `sibyl cluster nodetool --dir D node1 getendpoints`).
test('node driver: discovers every node of a cluster and routes by token', { skip: !process.env.SIBYL_EXPECT_NODES }, async () => {
  const host = process.env.SIBYL_HOST, port = Number(process.env.SIBYL_PORT);
  const dc = process.env.SIBYL_DC || 'datacenter1';
  const client = new cassandra.Client({
    contactPoints: [host], protocolOptions: { port }, localDataCenter: dc,
    socketOptions: { readTimeout: 30000 },
  });
  await client.connect();
  try {
    const hosts = client.hosts.values();
    assert.strictEqual(hosts.length, Number(process.env.SIBYL_EXPECT_NODES));
    for (const h of hosts) {
      assert.ok(h.isUp(), `${h.address} up`);
      assert.strictEqual(h.datacenter, dc);
    }
    await client.execute(`CREATE KEYSPACE IF NOT EXISTS node_ring WITH replication = {'class': 'NetworkTopologyStrategy', '${dc}': 2}`);
    await client.execute('CREATE TABLE IF NOT EXISTS node_ring.t (k text PRIMARY KEY, v int)');
    await client.metadata.refreshKeyspaces();
    if (process.env.SIBYL_ENDPOINTS_CMD) {
      const { execSync } = require('node:child_process');
      for (const k of ['a', 'b', 'c', 'd', 'e']) {
        const ours = execSync(`${process.env.SIBYL_ENDPOINTS_CMD} node_ring t ${k}`).toString().split(/\s+/).filter(Boolean).sort();
        const driver = client.getReplicas('node_ring', Buffer.from(k)).map((h) => h.address.split(':')[0]).sort();
        assert.deepStrictEqual(driver, ours, k);
      }
    }
  } finally {
    await client.shutdown();
  }
});
