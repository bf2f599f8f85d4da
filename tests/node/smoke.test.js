// Smoke test with the DataStax Node.js driver against SIBYL_HOST:SIBYL_PORT.
const test = require('node:test');
const assert = require('node:assert');
const cassandra = require('cassandra-driver');

test('node driver: connect, DDL, prepared insert and select, paging', async (t) => {
  const host = process.env.SIBYL_HOST, port = Number(process.env.SIBYL_PORT);
  if (!host || !port) { t.skip('SIBYL_HOST and SIBYL_PORT not set'); return; }
  const client = new cassandra.Client({ contactPoints: [`${host}:${port}`], localDataCenter: 'datacenter1' });
  await client.connect();
  const ks = 'node_' + Date.now() % 1000000;
  try {
    await client.execute(`CREATE KEYSPACE ${ks} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`);
    await client.execute(`CREATE TABLE ${ks}.t (k int, c int, v text, PRIMARY KEY (k, c))`);
    for (let i = 0; i < 1000; i++) {
      await client.execute(`INSERT INTO ${ks}.t (k, c, v) VALUES (?, ?, ?)`, [1, i, 'v' + i], { prepare: true });
    }
    let n = 0;
    for await (const row of client.stream(`SELECT c, v FROM ${ks}.t WHERE k = ?`, [1], { prepare: true, fetchSize: 100 })) {
      assert.strictEqual(row.c, n);
      assert.strictEqual(row.v, 'v' + n);
      n++;
    }
    assert.strictEqual(n, 1000);
    const rs = await client.execute('SELECT release_version FROM system.local');
    assert.ok(rs.first().release_version);
    await client.execute(`DROP KEYSPACE ${ks}`);
  } finally {
    await client.shutdown();
  }
});
