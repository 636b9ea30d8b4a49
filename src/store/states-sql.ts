/**
 * The transition tables (src/domain/states.ts) in SQL: a repository applies a change only from its
 * source states, `WHERE state IN ${fromStates('delivery', 'DELIVERED', 'DEAD')}`. The list is
 * built from the table when the module loads (constants, never input), so statements stay the
 * same text and stay prepared.
 */
import { type Entity, type StateOf, sourcesOf } from '../domain/states.ts';

/** `('A', 'B')`: the states any of `targets` may be reached from. */
export function fromStates<K extends Entity>(entity: K, ...targets: StateOf<K>[]): string {
  const sources = [...new Set(targets.flatMap((t) => sourcesOf(entity, t)))].sort();
  if (sources.length === 0) throw new Error(`${entity}: nothing leads to ${targets.join(', ')}`);
  for (const s of sources) if (!/^[A-Z_]+$/.test(s)) throw new Error(`${entity}: state ${s} is not a plain name`);
  return `(${sources.map((s) => `'${s}'`).join(', ')})`;
}

/** `('A', 'B', 'T')`: `to` itself (a row already there stays, e.g. is made due again) or any state that may reach it. */
export function atOrFromStates<K extends Entity>(entity: K, to: StateOf<K>): string {
  const states = [...new Set([to, ...sourcesOf(entity, to)])].sort();
  for (const s of states) if (!/^[A-Z_]+$/.test(s)) throw new Error(`${entity}: state ${s} is not a plain name`);
  return `(${states.map((s) => `'${s}'`).join(', ')})`;
}
