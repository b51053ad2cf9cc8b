// Validators, views, capped and TTL collections through mongosh (the
// Node.js driver): the helpers users type, and the errors they see. Run
// as crud.js is; any mismatch exits non-zero.

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
function caught(f) {
  try {
    f();
  } catch (e) {
    return e;
  }
  return null;
}

const d = db.getSiblingDB('mongosh_collections');
d.dropDatabase();

// A $jsonSchema validator: the insert fails with 121 and errInfo.
d.createCollection('people', {validator: {$jsonSchema: {required: ['name'], properties: {age: {bsonType: 'int', minimum: 0}}}}});
let e = caught(() => d.people.insertOne({_id: 1, age: -1}));
check('validation code', e && e.code, 121);
check('validation errInfo id', e && e.errInfo && e.errInfo.failingDocumentId, 1);
check('validation operator', e && e.errInfo && e.errInfo.details.operatorName, '$jsonSchema');
check('valid insert', d.people.insertOne({name: 'ann', age: NumberInt(3)}).acknowledged, true);
check('bypass', d.people.insertOne({age: -5}, {bypassDocumentValidation: true}).acknowledged, true);
check('validator listed', d.getCollectionInfos({name: 'people'})[0].options.validator.$jsonSchema.required, ['name']);

// A view: read-only, read through its pipeline.
d.orders.insertMany([{_id: 1, qty: 5}, {_id: 2, qty: 0}]);
d.createView('instock', 'orders', [{$match: {qty: {$gt: 0}}}]);
check('view find', d.instock.find().toArray(), [{_id: 1, qty: 5}]);
check('view count', d.instock.countDocuments(), 1);
check('view type', d.getCollectionInfos({name: 'instock'})[0].type, 'view');
e = caught(() => d.instock.insertOne({qty: 1}));
check('view insert refused', e && e.code, 166);

// A capped collection keeps the newest documents.
d.createCollection('log', {capped: true, size: 4096, max: 2});
for (let i = 0; i < 5; i++) d.log.insertOne({_id: i});
check('capped keeps newest', d.log.find().toArray(), [{_id: 3}, {_id: 4}]);
check('isCapped', d.log.isCapped(), true);

// A TTL index is listed with its expireAfterSeconds.
d.sessions.createIndex({at: 1}, {expireAfterSeconds: 3600});
check('ttl index', d.sessions.getIndexes()[1].expireAfterSeconds, 3600);

if (failures > 0) {
  print(`${failures} failure(s)`);
  quit(1);
}
print('all checks passed');
