// The replication and status helpers of mongosh (rs.*, db.serverStatus,
// db.stats) against a single-node replica set. Run as crud.js is; any
// mismatch exits non-zero.

let failures = 0;
function check(what, got, want) {
  const g = EJSON.stringify(got), w = EJSON.stringify(want);
  if (g !== w) {
    print(`FAIL ${what}: got ${g}, want ${w}`);
    failures++;
  } else {
    print(`ok   ${what}`);
  }
}

const d = db.getSiblingDB('mongosh_replication');
d.dropDatabase();
d.c.insertMany([{a: 1}, {a: 2}]);

// rs.printReplicationInfo reads local.oplog.rs: listed, with collStats, first and last entries.
const info = db.getReplicationInfo();
check('oplog configured size', info.configuredLogSizeMB > 0, true);
check('oplog used', info.usedMB > 0, true);
check('oplog window', typeof info.timeDiff, 'number');
check('oplog first entry', typeof info.tFirst, 'string');
const printed = rs.printReplicationInfo();
check('printReplicationInfo', printed.type, 'StatsResult');
check('local lists the oplog', db.getSiblingDB('local').getCollectionNames().includes('oplog.rs'), true);
check('listDatabases lists local', db.adminCommand({listDatabases: 1}).databases.some((x) => x.name === 'local'), true);
const last = db.getSiblingDB('local').oplog.rs.find().sort({$natural: -1}).limit(1).next();
check('last oplog entry is the insert', [last.op, last.ns], ['i', 'mongosh_replication.c']);

// rs.status and rs.printSecondaryReplicationInfo (which reads local.system.replset).
const st = rs.status();
check('rs.status set', [st.set, st.myState, st.members.length], ['rs0', 1, 1]);
check('system.replset', db.getSiblingDB('local').system.replset.countDocuments({}), 1);
check('rs.conf', rs.conf()._id, 'rs0');
rs.printSecondaryReplicationInfo();

// db.serverStatus: the sections mongosh and mongostat read.
const ss = db.serverStatus();
check('serverStatus uptime is whole', ss.uptime === Math.floor(ss.uptime), true);
check('serverStatus opcounters insert', ss.opcounters.insert >= 2, true);
check('serverStatus sections', ['connections', 'mem', 'network', 'opcounters', 'opcountersRepl', 'globalLock', 'repl'].every((k) => k in ss), true);

// db.stats and collection stats.
const ds = d.stats();
check('db.stats', [ds.db, Number(ds.collections), Number(ds.objects)], ['mongosh_replication', 1, 2]);
d.createCollection('cap', {capped: true, size: 8192, max: 3});
const cs = d.cap.stats();
check('capped stats', [cs.capped, cs.maxSize, cs.max], [true, 8192, 3]);

d.dropDatabase();
if (failures > 0) {
  print(`${failures} failure(s)`);
  quit(1);
}
print('all checks passed');
