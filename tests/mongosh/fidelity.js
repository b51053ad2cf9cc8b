// Reply and error shapes as mongod 7.0 gives them, seen through mongosh
// (the Node.js driver): bulk write errors, duplicate keys, findOneAnd*,
// listings, IDL parse errors, write concern errors, stats, change-stream
// validation. Run as crud.js is; any mismatch exits non-zero.

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
// caught runs f and returns the error it throws (null if none).
function caught(f) {
  try {
    f();
  } catch (e) {
    return e;
  }
  return null;
}

const d = db.getSiblingDB('mongosh_fidelity');
d.dropDatabase();
const c = d.c;

// Duplicate keys: errmsg format, keyPattern, keyValue.
c.insertMany([{ _id: 1, email: 'a@x' }, { _id: 2, email: 'b@x' }]);
check('createIndex unique', c.createIndex({ email: 1 }, { unique: true }), 'email_1');
check('createIndex compound', c.createIndex({ email: 1, _id: -1 }, { name: 'compound' }), 'compound');
let e = caught(() => c.insertOne({ _id: 3, email: 'a@x' }));
check('dup key error', [e.code, e.errmsg, e.errInfo === undefined],
  [11000, 'E11000 duplicate key error collection: mongosh_fidelity.c index: email_1 dup key: { email: "a@x" }', true]);
let raw = d.runCommand({ insert: 'c', documents: [{ _id: 1 }] });
check('dup key write error', [raw.n, raw.writeErrors[0].code, raw.writeErrors[0].keyPattern, raw.writeErrors[0].keyValue],
  [0, 11000, { _id: 1 }, { _id: 1 }]);

// bulkWrite: ordered stops at the first error, unordered goes on.
e = caught(() => c.bulkWrite([
  { insertOne: { document: { _id: 10, email: 'c@x' } } },
  { insertOne: { document: { _id: 10, email: 'd@x' } } },
  { insertOne: { document: { _id: 11, email: 'e@x' } } },
]));
check('ordered bulkWrite', [e.code, e.writeErrors.length, e.writeErrors[0].index, e.result.insertedCount], [11000, 1, 1, 1]);
e = caught(() => c.bulkWrite([
  { insertOne: { document: { _id: 20, email: 'f@x' } } },
  { insertOne: { document: { _id: 20, email: 'g@x' } } },
  { updateOne: { filter: { _id: 20 }, update: { $set: { n: 1 } } } },
  { deleteOne: { filter: { _id: 10 } } },
], { ordered: false }));
check('unordered bulkWrite', [e.writeErrors.map(w => w.index), e.result.insertedCount, e.result.modifiedCount, e.result.deletedCount],
  [[1], 1, 1, 1]);
raw = d.runCommand({ update: 'c', updates: [{ q: { _id: 30 }, u: { $set: { email: 'h@x' } }, upsert: true }, { q: { _id: 1 }, u: { $set: { v: 1 } } }] });
check('update reply', [raw.n, raw.nModified, raw.upserted], [2, 1, [{ index: 0, _id: 30 }]]);

// findOneAnd*.
check('findOneAndUpdate after+projection',
  c.findOneAndUpdate({ _id: 1 }, { $inc: { v: 1 } }, { returnDocument: 'after', projection: { v: 1, _id: 0 } }), { v: 2 });
check('findOneAndUpdate before', c.findOneAndUpdate({ _id: 1 }, { $inc: { v: 1 } }).v, 2);
check('findOneAndUpdate upsert', c.findOneAndUpdate({ _id: 40 }, { $set: { email: 'i@x' } }, { upsert: true, returnDocument: 'after' }),
  { _id: 40, email: 'i@x' });
check('findOneAndReplace', c.findOneAndReplace({ _id: 40 }, { email: 'j@x' }, { returnDocument: 'after' }), { _id: 40, email: 'j@x' });
check('findOneAndDelete sort', c.findOneAndDelete({ _id: { $gte: 20 } }, { sort: { _id: -1 } })._id, 40);
check('findOneAndDelete none', c.findOneAndDelete({ _id: 'nope' }), null);
raw = d.runCommand({ findAndModify: 'c', query: { _id: 50 }, update: { $set: { email: 'k@x' } }, upsert: true, new: true });
check('findAndModify upsert reply', [raw.lastErrorObject, raw.value], [{ n: 1, updatedExisting: false, upserted: 50 }, { _id: 50, email: 'k@x' }]);

// Counts, distinct, aggregation.
check('countDocuments', c.countDocuments({ email: { $exists: true } }), 5);
check('estimatedDocumentCount', c.estimatedDocumentCount(), 5);
check('distinct', c.distinct('email', { _id: { $lt: 30 } }).sort(), ['a@x', 'b@x', 'f@x']);
d.o.insertMany([{ _id: 1, c: 1, q: 2 }, { _id: 2, c: 1, q: 3 }, { _id: 3, c: 2, q: 1 }]);
check('$group', d.o.aggregate([{ $group: { _id: '$c', q: { $sum: '$q' } } }, { $sort: { _id: 1 } }]).toArray(), [{ _id: 1, q: 5 }, { _id: 2, q: 1 }]);
check('$lookup+$unwind', c.aggregate([
  { $match: { _id: 1 } },
  { $lookup: { from: 'o', localField: '_id', foreignField: 'c', as: 'orders' } },
  { $unwind: '$orders' },
  { $project: { _id: 0, q: '$orders.q' } },
]).toArray(), [{ q: 2 }, { q: 3 }]);
check('$facet', d.o.aggregate([{ $facet: { n: [{ $count: 'n' }], top: [{ $sort: { q: -1 } }, { $limit: 1 }, { $project: { _id: 1 } }] } }]).toArray(),
  [{ n: [{ n: 3 }], top: [{ _id: 2 }] }]);

// Listings.
const idx = c.getIndexes();
check('listIndexes', idx.map(i => [i.v, i.name, i.key, i.unique === true]),
  [[2, '_id_', { _id: 1 }, false], [2, 'email_1', { email: 1 }, true], [2, 'compound', { email: 1, _id: -1 }, false]]);
const colls = d.runCommand({ listCollections: 1, filter: { name: 'c' } }).cursor;
check('listCollections shape', [colls.ns, colls.firstBatch.map(x => [x.name, x.type, x.info.readOnly, x.info.uuid.sub_type, x.idIndex.name])],
  ['mongosh_fidelity.$cmd.listCollections', [['c', 'collection', false, 4, '_id_']]]);
const dbs = db.adminCommand({ listDatabases: 1 });
const mine = dbs.databases.find(x => x.name === 'mongosh_fidelity');
check('listDatabases shape', [mine.sizeOnDisk._bsontype, mine.empty, dbs.totalSize._bsontype], ['Long', false, 'Long']); // int64, as mongod

// renameCollection.
check('renameCollection', d.o.renameCollection('o2').ok, 1);
e = caught(() => d.o.renameCollection('o3'));
check('rename missing source', [e.code, e.codeName], [26, 'NamespaceNotFound']);
e = caught(() => d.o2.renameCollection('c'));
check('rename onto existing', [e.code, e.codeName], [48, 'NamespaceExists']);

// IDL parse errors.
e = caught(() => d.runCommand({ find: 'c', frob: 1 }));
check('unknown field', [e.code, e.errmsg], [40415, "BSON field 'find.frob' is an unknown field."]);
e = caught(() => d.runCommand({ insert: 'c' }));
check('missing field', [e.code, e.errmsg], [40414, "BSON field 'insert.documents' is missing but a required field"]);
e = caught(() => d.runCommand({ delete: 'c', deletes: [{ q: {}, limit: 2 }] }));
check('delete limit', [e.code, e.errmsg], [9, 'The limit field in delete objects must be 0 or 1. Got 2']);
e = caught(() => d.runCommand({ find: 1 }));
check('find: 1', [e.code, e.codeName], [73, 'InvalidNamespace']);

// Cursors.
const first = d.runCommand({ find: 'c', batchSize: 1 });
e = caught(() => d.runCommand({ getMore: first.cursor.id, collection: 'other' }));
check('getMore on another namespace', [e.code, e.errmsg],
  [13, "Requested getMore on namespace 'mongosh_fidelity.other', but cursor belongs to a different namespace mongosh_fidelity.c"]);
raw = d.runCommand({ killCursors: 'c', cursors: [first.cursor.id, Long.fromNumber(424242)] });
check('killCursors', [raw.cursorsKilled.length, raw.cursorsNotFound, raw.cursorsAlive, raw.cursorsUnknown], [1, [Long.fromNumber(424242)], [], []]);

// Write concern a one-member set cannot satisfy: applied, then reported.
e = caught(() => c.insertOne({ _id: 60 }, { writeConcern: { w: 2 } }));
check('w: 2', [e && e.code, c.countDocuments({ _id: 60 })], [100, 1]);

// Stats.
const st = c.stats();
check('stats', [st.ns, st.count, st.nindexes], ['mongosh_fidelity.c', 6, 3]);

// explain.
const plan = c.find({ email: 'a@x' }).explain('executionStats');
check('explain', [plan.queryPlanner.namespace, plan.queryPlanner.winningPlan.stage, plan.queryPlanner.winningPlan.inputStage.indexName,
  plan.executionStats.nReturned], ['mongosh_fidelity.c', 'FETCH', 'email_1', 1]);

// Change-stream validation.
e = caught(() => c.aggregate([{ $match: {} }, { $changeStream: {} }]).toArray());
check('misplaced $changeStream', e.code, 40602);

d.dropDatabase();
if (failures > 0) {
  print(`${failures} check(s) failed`);
  quit(1);
}
print('all checks passed');
