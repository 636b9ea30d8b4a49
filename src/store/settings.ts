/** Repository: platform settings set at run time (the platform IP policy, the sandbox's notice secret). */
import { type Db, type Queryable, type Tx, withTx } from './db.ts';

/** A setting's stored value, or null. */
export async function getSetting<T>(db: Queryable, name: string): Promise<T | null> {
  const r = await db.query<{ value: T }>('SELECT value FROM platform_settings WHERE name = $1', [name]);
  return r.rows[0]?.value ?? null;
}

/**
 * Changes a setting with its row locked: `change` gets the stored value (null when none) and
 * answers the new one (it may throw to change nothing), so concurrent changes of different parts
 * all land.
 */
export async function updateSetting<T>(
  db: Db,
  name: string,
  now: Date,
  change: (stored: T | null) => T,
  /** Runs in the same transaction once the new value is written (the back office's audit entry). */
  after?: (tx: Tx, stored: T | null, next: T) => Promise<void>,
): Promise<T> {
  return withTx(db, async (tx) => {
    await tx.query(`INSERT INTO platform_settings(name, value, updated_at) VALUES ($1, 'null'::jsonb, $2) ON CONFLICT (name) DO NOTHING`, [
      name,
      now,
    ]);
    const r = await tx.query<{ value: T | null }>(`SELECT value FROM platform_settings WHERE name = $1 FOR UPDATE`, [name]);
    const next = change(r.rows[0]?.value ?? null);
    await tx.query(`UPDATE platform_settings SET value = $2, updated_at = $3 WHERE name = $1`, [name, JSON.stringify(next), now]);
    await after?.(tx, r.rows[0]?.value ?? null, next);
    return next;
  });
}

/** Stores `value` unless the setting exists; answers the stored value (the first writer's). */
export async function settingOnce<T>(db: Queryable, name: string, value: T): Promise<T> {
  await db.query(`INSERT INTO platform_settings(name, value) VALUES ($1, $2::jsonb) ON CONFLICT (name) DO NOTHING`, [
    name,
    JSON.stringify(value),
  ]);
  return (await getSetting<T>(db, name))!;
}
