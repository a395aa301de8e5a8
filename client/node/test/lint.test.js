// client/node/test/lint.test.js — what review would otherwise check by hand: index.d.ts declares
// exactly what index.js exports (every export, every method and static of every exported class,
// every member of `wire`), package.json is ready to publish (name, version, ESM, exports and
// types that exist, files that hold every module the entry point loads, engines, license, no
// install scripts, no dependencies), and every source file opens with its contract. With npm on
// the PATH it also packs the package and installs it into an empty project offline.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

import * as api from '../index.js';

const clientDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dts = readFileSync(path.join(clientDir, 'index.d.ts'), 'utf8');
const pkg = JSON.parse(readFileSync(path.join(clientDir, 'package.json'), 'utf8'));

// The body of `export declare <kind> <name> ... { ... }`, braces matched.
function declarationBody(kind, name) {
  const start = new RegExp(`export declare ${kind} ${name}\\b[^{]*\\{`).exec(dts);
  assert.ok(start, `index.d.ts declares ${kind} ${name}`);
  let depth = 1;
  let at = start.index + start[0].length;
  const from = at;
  while (depth > 0 && at < dts.length) {
    if (dts[at] === '{') depth += 1;
    if (dts[at] === '}') depth -= 1;
    at += 1;
  }
  return dts.slice(from, at - 1);
}

// Member names at the top level of a class or namespace body (nested braces skipped).
function memberNames(body, { values = false } = {}) {
  let depth = 0;
  let top = '';
  for (const c of body) {
    if (c === '{') depth += 1;
    if (depth === 0) top += c;
    if (c === '}') depth -= 1;
  }
  const names = new Set();
  for (const raw of top.split('\n')) {
    const line = raw.replace(/\/\/.*$/, '').trim();
    let match;
    if (values) match = /^(?:const|function)\s+([A-Za-z_$][\w$]*)/.exec(line);
    else match = /^(?:static\s+)?(?:readonly\s+)?(?:get\s+)?([A-Za-z_$][\w$]*)\??\s*[:(<]/.exec(line);
    if (match) names.add(match[1]);
  }
  return names;
}

test('lint: index.d.ts declares every runtime export, and nothing that is not one', () => {
  const declared = new Set();
  for (const match of dts.matchAll(/^export declare (?:const|function|class|namespace) ([A-Za-z_$][\w$]*)/gm)) declared.add(match[1]);
  assert.deepEqual([...declared].sort(), Object.keys(api).sort());
});

test('lint: every exported class has exactly its declared methods, getters and statics', () => {
  for (const [name, value] of Object.entries(api)) {
    if (typeof value !== 'function' || !/^class\s/.test(Function.prototype.toString.call(value))) continue;
    const declared = memberNames(declarationBody('class', name));
    declared.delete('constructor');
    const runtime = new Set();
    for (const key of Object.getOwnPropertyNames(value.prototype)) if (key !== 'constructor') runtime.add(key);
    for (const key of Object.getOwnPropertyNames(value)) if (!['length', 'name', 'prototype'].includes(key)) runtime.add(key);
    for (const key of runtime) assert.ok(declared.has(key), `${name}.${key} is not declared in index.d.ts`);
    // Declared members that are not methods, getters or statics must be instance fields.
    const instanceFields = {
      Client: [],
      FlurryError: ['name', 'code', 'reason', 'detail'],
      Layout: ['timeBits', 'nodeBits', 'sequenceBits', 'coreBits', 'coreFrom', 'epochMs', 'timeUnitMs'],
      ReadableForm: ['layout', 'yearDigits', 'fractionDigits', 'restBits', 'restDigits'],
      OpaqueKey: ['id'],
      KeyRing: ['keys', 'current'],
    }[name];
    assert.ok(instanceFields, `class ${name} is listed here`);
    for (const key of declared) {
      assert.ok(runtime.has(key) || instanceFields.includes(key), `${name}.${key} is declared but does not exist`);
    }
  }
  const layout = new api.Layout();
  for (const field of ['timeBits', 'nodeBits', 'sequenceBits', 'coreBits', 'coreFrom', 'epochMs', 'timeUnitMs']) assert.ok(field in layout);
  const key = new api.OpaqueKey('k1', '000102030405060708090a0b0c0d0e0f');
  assert.ok('id' in key);
  const ring = new api.KeyRing([key]);
  assert.ok('keys' in ring && 'current' in ring);
  const form = new api.ReadableForm(layout);
  for (const field of ['layout', 'yearDigits', 'fractionDigits', 'restBits', 'restDigits']) assert.ok(field in form);
  const error = new api.FlurryError('closed', 'x', { reason: 'r', detail: 1 });
  for (const field of ['name', 'code', 'reason', 'detail']) assert.ok(field in error);
});

test('lint: the wire namespace declares exactly lib/wire.js', () => {
  const declared = memberNames(declarationBody('namespace', 'wire'), { values: true });
  assert.deepEqual([...declared].sort(), Object.keys(api.wire).sort());
});

test('lint: the error codes of the types are the runtime ones', () => {
  const union = /export type ErrorCode =([^;]+);/.exec(dts);
  assert.ok(union);
  const codes = [...union[1].matchAll(/'([a-z_]+)'/g)].map((match) => match[1]);
  assert.deepEqual(codes, [...api.ERROR_CODES]);
});

// Every module index.js loads, by following relative imports.
function modulesOf(entry) {
  const seen = new Set();
  const visit = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/(?:import|export)[^'"]*from\s+'(\.[^']+)'/g)) visit(path.resolve(path.dirname(file), match[1]));
  };
  visit(entry);
  return [...seen].map((file) => path.relative(clientDir, file));
}

test('lint: package.json is ready to publish', async () => {
  assert.match(pkg.name, /^(@flurry\/client|flurry-client)$/);
  assert.equal(pkg.version, api.VERSION);
  assert.equal(pkg.type, 'module');
  assert.equal(pkg.license, 'Apache-2.0');
  assert.equal(pkg.engines.node, '>=18');
  assert.equal(pkg.types, './index.d.ts');
  assert.equal(pkg.exports['.'].types, './index.d.ts');
  assert.equal(pkg.exports['.'].default, './index.js');
  assert.ok(Object.keys(pkg.exports['.'])[0] === 'types', '"types" comes first in the export conditions');
  for (const file of [pkg.main, pkg.types, pkg.exports['.'].default]) assert.ok(existsSync(path.join(clientDir, file)), file);
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'bundledDependencies']) {
    assert.equal(pkg[field], undefined, `no ${field}: the client is the standard library only`);
  }
  for (const script of ['preinstall', 'install', 'postinstall', 'prepare', 'prepublish', 'preprepare', 'postprepare']) {
    assert.equal(pkg.scripts?.[script], undefined, `no ${script} script`);
  }
  const packed = (file) => pkg.files.some((entry) => (entry.endsWith('/') ? file.startsWith(entry) : file === entry));
  for (const module of modulesOf(path.join(clientDir, 'index.js'))) assert.ok(packed(module), `${module} is in "files"`);
  assert.ok(packed('index.d.ts') && packed('README.md'));
  // The entry point loads through the package's own name.
  const self = await import(pathToFileURL(path.join(clientDir, 'index.js')).href);
  assert.equal(self.VERSION, pkg.version);
});

test('lint: every source file opens with its contract', () => {
  const files = ['index.js', 'index.d.ts'];
  for (const dir of ['lib', 'test']) {
    for (const name of readdirSync(path.join(clientDir, dir))) if (name.endsWith('.js')) files.push(`${dir}/${name}`);
  }
  for (const file of files) {
    const first = readFileSync(path.join(clientDir, file), 'utf8').split('\n', 1)[0];
    assert.ok(first.startsWith(`// client/node/${file} — `), `${file} opens with "// client/node/${file} — <contract>"`);
  }
});

function npmPath() {
  try {
    return execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

test('lint: npm packs the package and installs it from the clone offline', (t) => {
  const npm = npmPath();
  if (npm === null) {
    // npm is not part of Debian's nodejs package; the checks above cover "files" without it.
    t.diagnostic('npm not found (Debian package npm): the pack and install check did not run');
    return;
  }
  const work = mkdtempSync(path.join(tmpdir(), 'flurry-node-pack-'));
  const env = { ...process.env, npm_config_cache: path.join(work, 'cache'), npm_config_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
  try {
    const listing = JSON.parse(execFileSync(npm, ['pack', '--dry-run', '--json', clientDir], { cwd: work, env, encoding: 'utf8' }));
    const files = listing[0].files.map((file) => file.path).sort();
    const expected = ['README.md', 'index.d.ts', 'index.js', 'package.json', ...readdirSync(path.join(clientDir, 'lib')).map((name) => `lib/${name}`)].sort();
    assert.deepEqual(files, expected);
    const project = path.join(work, 'app');
    execFileSync('mkdir', ['-p', project]);
    writeFileSync(path.join(project, 'package.json'), '{"name": "app", "version": "1.0.0", "private": true, "type": "module"}\n');
    execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', clientDir], { cwd: project, env, stdio: 'pipe' });
    writeFileSync(path.join(project, 'check.mjs'), "import { VERSION, Client } from '@flurry/client';\nconsole.log(VERSION, typeof Client);\n");
    const out = execFileSync(process.execPath, ['check.mjs'], { cwd: project, encoding: 'utf8' }).trim();
    assert.equal(out, `${pkg.version} function`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
