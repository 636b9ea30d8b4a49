/**
 * A move of one row of a machine of its own into a fixed state, whatever state the row was read
 * in (a duplicate's refund found refunded, an event delivered again): the transition from the
 * state read, checked against the tables (src/domain/states.ts), applied by the store only over
 * that state. A row that moved meanwhile is read again and the move decided again from its new
 * state, so a change committed in between is never overwritten and the move is never lost.
 */
import { type Entity, type StateOf, type Transition, canTransition, transition } from '../domain/states.ts';

/** Tries at most (each further one follows a change of the row committed meanwhile). */
const MAX_TRIES = 100;

/**
 * MOVED: applied from `from`. THERE: the row is in `to` already. BARRED: the tables lead nowhere
 * from its state to `to` (a final state: nothing is written). GONE: no such row.
 */
export type MoveOutcome<K extends Entity> = { outcome: 'MOVED' | 'THERE' | 'BARRED'; from: StateOf<K> } | { outcome: 'GONE'; from: null };

/**
 * Moves the row into `to`: from `state` (as the caller read it), else from what `read` answers
 * each time `apply` finds the row no longer in the transition's source state.
 */
export async function moveInto<K extends Entity>(
  entity: K,
  flow: string,
  to: StateOf<K>,
  state: StateOf<K> | null,
  read: () => Promise<StateOf<K> | null>,
  apply: (t: Transition<K>) => Promise<boolean>,
): Promise<MoveOutcome<K>> {
  let from = state;
  for (let tries = 1; ; tries++) {
    if (from === null) return { outcome: 'GONE', from: null };
    if (from === to) return { outcome: 'THERE', from };
    if (!canTransition(entity, from, to)) return { outcome: 'BARRED', from };
    if (await apply(transition(entity, flow, from, to))) return { outcome: 'MOVED', from };
    if (tries >= MAX_TRIES) throw new Error(`${flow}: the ${entity} kept changing (${MAX_TRIES} tries)`);
    from = await read();
  }
}
