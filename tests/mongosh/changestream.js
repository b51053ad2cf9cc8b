// A scripted mongosh session that watches a collection on Tide's embedded server:
//   mongosh "mongodb://127.0.0.1:PORT/?directConnection=true" --quiet --norc --file tests/mongosh/changestream.js
// Every step checks its own result; any mismatch exits non-zero.

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

// nextEvent polls the stream until an event arrives (each tryNext waits
// up to maxAwaitTimeMS on the server), or gives up after ~10 s.
function nextEvent(cs) {
  for (let i = 0; i < 50; i++) {
    const ev = cs.tryNext();
    if (ev !== null) return ev;
  }
  return null;
}

const d = db.getSiblingDB('mongosh_changestream');
d.dropDatabase();
const coll = d.events;

const cs = coll.watch([], { maxAwaitTimeMS: 200 });
check('token before any event', typeof cs.getResumeToken()._data, 'string');

coll.insertOne({ _id: 1, x: 1 });
coll.updateOne({ _id: 1 }, { $set: { x: 2 }, $unset: { gone: '' } });
coll.replaceOne({ _id: 1 }, { y: 3 });
coll.deleteOne({ _id: 1 });

const ins = nextEvent(cs);
check('insert type', ins && ins.operationType, 'insert');
check('insert fields', ins && Object.keys(ins), ['_id', 'operationType', 'clusterTime', 'wallTime', 'fullDocument', 'ns', 'documentKey']);
check('insert document', ins && ins.fullDocument, { _id: 1, x: 1 });
check('insert ns', ins && ins.ns, { db: 'mongosh_changestream', coll: 'events' });
check('token is the event id', EJSON.stringify(cs.getResumeToken()), EJSON.stringify(ins && ins._id));
const afterInsert = cs.getResumeToken();

const upd = nextEvent(cs);
check('update type', upd && upd.operationType, 'update');
check('update description', upd && upd.updateDescription, { updatedFields: { x: 2 }, removedFields: [], truncatedArrays: [] });

const rep = nextEvent(cs);
check('replace document', rep && [rep.operationType, rep.fullDocument], ['replace', { _id: 1, y: 3 }]);

const del = nextEvent(cs);
check('delete key', del && [del.operationType, del.documentKey], ['delete', { _id: 1 }]);
check('tokens ascend', ins._id._data < upd._id._data && upd._id._data < rep._id._data && rep._id._data < del._id._data, true);

// Resume after the insert: the same three events again.
const resumed = coll.watch([], { resumeAfter: afterInsert, maxAwaitTimeMS: 200 });
check('resumed events', [nextEvent(resumed), nextEvent(resumed), nextEvent(resumed)].map(e => e && e.operationType),
  ['update', 'replace', 'delete']);
resumed.close();

// A following $match stage filters events.
const onlyInserts = coll.watch([{ $match: { operationType: 'insert' } }], { maxAwaitTimeMS: 200 });
coll.insertOne({ _id: 2 });
coll.deleteOne({ _id: 2 });
coll.insertOne({ _id: 3 });
check('$match keeps inserts', [nextEvent(onlyInserts), nextEvent(onlyInserts)].map(e => e && e.documentKey._id), [2, 3]);
onlyInserts.close();

// Dropping the collection: drop, then invalidate, then the stream is closed.
const drops = coll.watch([], { maxAwaitTimeMS: 200 });
coll.drop();
check('drop then invalidate', [nextEvent(drops), nextEvent(drops)].map(e => e && e.operationType), ['drop', 'invalidate']);
check('closed after invalidate', drops.isClosed(), true);

// A bad option is refused with MongoDB's code.
let code = null;
try {
  coll.watch([], { fullDocument: 'sometimes' }).tryNext();
} catch (e) {
  code = e.code;
}
check('bad fullDocument refused', code, 2);

cs.close();
if (failures > 0) {
  print(`${failures} check(s) failed`);
  quit(1);
}
print('all checks passed');
