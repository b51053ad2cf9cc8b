// A scripted mongosh session against Tide's embedded server:
//   mongosh "mongodb://127.0.0.1:PORT/?directConnection=true" --quiet --file tests/mongosh/crud.js
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

const d = db.getSiblingDB('mongosh_crud');
d.dropDatabase();
const people = d.people;

// Insert.
const ins = people.insertMany([
  { _id: 1, name: 'ada', age: 36, langs: ['en', 'fr'] },
  { _id: 2, name: 'bob', age: 25, langs: ['en'] },
  { _id: 3, name: 'cyd', age: 41, langs: [] },
]);
check('insertMany acknowledged', ins.acknowledged, true);
check('insertMany ids', Object.values(ins.insertedIds), [1, 2, 3]);
check('insertOne', people.insertOne({ _id: 4, name: 'dee', age: 30 }).insertedId, 4);

// Query with filter, sort and projection.
check('find filter/sort/projection',
  people.find({ age: { $gte: 30 } }, { _id: 0, name: 1 }).sort({ age: -1 }).toArray(),
  [{ name: 'cyd' }, { name: 'ada' }, { name: 'dee' }]);
check('find $in + limit', people.find({ name: { $in: ['bob', 'dee'] } }).sort({ _id: 1 }).limit(1).toArray().map(p => p._id), [2]);
check('findOne by element', people.findOne({ langs: 'fr' }, { name: 1 }), { _id: 1, name: 'ada' });
check('countDocuments', people.countDocuments({ age: { $lt: 40 } }), 3);

// Update with operators.
let u = people.updateOne({ _id: 2 }, { $inc: { age: 1 }, $push: { langs: 'de' }, $set: { 'address.city': 'Oslo' } });
check('updateOne counts', [u.matchedCount, u.modifiedCount], [1, 1]);
check('updateOne result', people.findOne({ _id: 2 }), { _id: 2, name: 'bob', age: 26, langs: ['en', 'de'], address: { city: 'Oslo' } });
u = people.updateMany({ age: { $gte: 30 } }, { $set: { senior: true } });
check('updateMany counts', [u.matchedCount, u.modifiedCount], [3, 3]);
u = people.updateOne({ _id: 9 }, { $set: { name: 'zed' } }, { upsert: true });
check('upsert', [u.matchedCount, u.upsertedCount, u.insertedId], [0, 1, 9]); // mongosh names the upserted _id insertedId
check('$unset', people.updateOne({ _id: 1 }, { $unset: { langs: '' } }).modifiedCount, 1);
check('findOneAndUpdate', people.findOneAndUpdate({ _id: 4 }, { $mul: { age: 2 } }, { returnDocument: 'after' }).age, 60);

// Aggregate.
check('aggregate $group',
  people.aggregate([
    { $match: { senior: true } },
    { $group: { _id: null, n: { $sum: 1 }, oldest: { $max: '$age' } } },
    { $project: { _id: 0 } },
  ]).toArray(),
  [{ n: 3, oldest: 60 }]);

// An index and a duplicate key.
check('createIndex', people.createIndex({ name: 1 }, { unique: true }), 'name_1');
check('indexes', people.getIndexes().map(i => i.name), ['_id_', 'name_1']);
let dupCode = null;
try {
  people.insertOne({ name: 'ada' });
} catch (e) {
  dupCode = e.code;
}
check('duplicate key', dupCode, 11000);

// Delete.
check('deleteOne', people.deleteOne({ _id: 9 }).deletedCount, 1);
check('deleteMany', people.deleteMany({ age: { $lt: 30 } }).deletedCount, 1);
check('remaining', people.find().sort({ _id: 1 }).toArray().map(p => p._id), [1, 3, 4]);

// List databases and collections.
d.other.insertOne({ x: 1 });
check('listCollections', d.getCollectionNames().sort(), ['other', 'people']);
const dbs = db.adminCommand({ listDatabases: 1 }).databases.map(x => x.name);
check('listDatabases has mongosh_crud', dbs.includes('mongosh_crud'), true);
check('hello', [db.hello().isWritablePrimary, typeof db.hello().setName], [true, 'string']);

d.dropDatabase();
if (failures > 0) {
  print(`${failures} check(s) failed`);
  quit(1);
}
print('all checks passed');
