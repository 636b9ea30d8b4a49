/** The benchmark's /proc readers behind "Where the time went" (bench/lib/proc.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { schedOf, schedShares, systemCpuSeconds } from '../lib/proc.ts';

test('schedShares: on a core, waiting for one, and asleep as shares of the interval', () => {
  const s = schedShares({ onCpuSec: 10, runQueueSec: 4 }, { onCpuSec: 11, runQueueSec: 4.5 }, 2);
  assert.deepEqual(s, { onCpu: 0.5, runQueue: 0.25, asleep: 0.25 });
  // Rounding between two reads never makes the rest negative.
  assert.equal(schedShares({ onCpuSec: 0, runQueueSec: 0 }, { onCpuSec: 1.5, runQueueSec: 0.6 }, 2).asleep, 0);
});

test('systemCpuSeconds and schedOf read this machine: times that only grow', { skip: process.platform !== 'linux' }, () => {
  const a = systemCpuSeconds();
  const ta = schedOf(process.pid);
  let x = 0;
  for (let i = 0; i < 2e6; i++) x += i; // some time on a core
  const b = systemCpuSeconds();
  const tb = schedOf(process.pid);
  assert.ok(x > 0);
  assert.ok(a.busy > 0 && a.idle >= 0, JSON.stringify(a));
  assert.ok(b.busy >= a.busy && b.idle >= a.idle);
  assert.ok(ta && tb, 'schedstat is kept by this kernel');
  assert.ok(tb.onCpuSec > ta.onCpuSec && tb.runQueueSec >= ta.runQueueSec);
  assert.equal(schedOf(2 ** 22 + 1), null, 'no such process');
});
