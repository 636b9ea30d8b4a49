/**
 * Repository: the request ids of re-creates of an order (migrations/0008), kept as long as
 * request-id answers.
 */
import type { Queryable, Tx } from './db.ts';

/** Whether this request id was already a re-create of the order (migrations/0008). */
export async function recreateRequestSeen(tx: Tx, orderId: string, requestId: string): Promise<boolean> {
  const r = await tx.query({
    name: 'recreate_request_seen',
    text: 'SELECT 1 FROM recreate_requests WHERE order_id = $1 AND request_id = $2',
    values: [orderId, requestId],
  });
  return r.rowCount !== 0;
}

export async function recordRecreateRequest(
  tx: Tx,
  orderId: string,
  requestId: string,
  attemptId: string | null,
  now: Date,
): Promise<void> {
  await tx.query({
    name: 'recreate_request_record',
    text: 'INSERT INTO recreate_requests(order_id, request_id, attempt_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
    values: [orderId, requestId, attemptId, now],
  });
}

export async function purgeRecreateRequests(db: Queryable, before: Date, limit: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM recreate_requests WHERE ctid IN (SELECT ctid FROM recreate_requests WHERE created_at < $1 LIMIT $2)`,
    [before, limit],
  );
  return r.rowCount ?? 0;
}
