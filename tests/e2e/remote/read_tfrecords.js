#!/usr/bin/env node
// Reads TFRecord files with @roboflow/tfrecords (npm), a reader that shares no code with
// Strata, and prints what it gives as JSON, for tests/e2e/remote_npm_reader_test.cc.
//
//   node read_tfrecords.js INSTALL_DIR FILE...
//
// INSTALL_DIR is where install_tfrecords_reader.sh put the package. Per file:
//   {"file", "gunzipped", "crc_errors": [...], "records": [base64...], "features": [{...}]}
// records: the bytes of each record exactly as the package framed them and checked them
// (length CRC and data CRC, its own CRC32C) and then handed to its protobuf decoder;
// features: each record decoded by the package's own tf.train.Example schema (google-protobuf),
// as {key: {"int64": [...]} | {"float": [...]} | {"bytes": [base64...]}}.
//
// The package reads uncompressed TFRecords only (it has no GZIP or ZLIB code): a file that
// starts with the gzip magic bytes is gunzipped here with node's zlib first ("gunzipped": true).
// The package logs "Wrong Length CRC" / "Wrong Data CRC" and stops reading at a bad record;
// those lines are collected into crc_errors.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const [installDir, ...files] = process.argv.slice(2);
const src = path.join(installDir, 'node_modules', '@roboflow', 'tfrecords', 'src');
const pb = require(path.join(src, 'tensorFlowRecordsProtoBuf_pb.js'));
const { TFRecordsReader } = require(path.join(src, 'tensorFlowReader.js'));

// The reader keeps only decoded messages; the bytes it decodes pass through here.
let handed = [];
const decode = pb.TFRecordsImageMessage.deserializeBinary;
pb.TFRecordsImageMessage.deserializeBinary = function (bytes) {
  handed.push(Buffer.from(bytes));
  return decode.call(this, bytes);
};

function features(message) {
  const out = {};
  message.getContext().getFeatureMap().forEach((feature, key) => {
    if (feature.hasInt64List()) out[key] = { int64: feature.getInt64List().getValueList().map(Number) };
    else if (feature.hasFloatList()) out[key] = { float: feature.getFloatList().getValueList() };
    else if (feature.hasBytesList())
      out[key] = { bytes: feature.getBytesList().getValueList_asU8().map((b) => Buffer.from(b).toString('base64')) };
    else out[key] = {};
  });
  return out;
}

const results = [];
for (const file of files) {
  let bytes = fs.readFileSync(file);
  const gunzipped = bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
  if (gunzipped) bytes = zlib.gunzipSync(bytes);
  handed = [];
  const crcErrors = [];
  const log = console.log;
  console.log = (...args) => crcErrors.push(args.join(' '));
  let reader;
  try {
    reader = new TFRecordsReader(bytes);
  } finally {
    console.log = log;
  }
  const messages = [];
  for (let i = 0; i < reader.length; ++i) messages.push(reader.imageMessages[i]);
  results.push({
    file,
    gunzipped,
    crc_errors: crcErrors,
    records: handed.map((b) => b.toString('base64')),
    features: messages.map(features),
  });
}
process.stdout.write(JSON.stringify(results));
