/**
 * The console's rows (src/ui/rows.ts) checked against the views that write the back office's
 * answers: `npm run typecheck` fails when an answer no longer carries a field a page reads, or
 * carries it with another type. The back office has no published schema; these views are what it
 * serves (sent as JSON, so a Date is read as its string).
 */
import type { eventDetailView, orderDetailView } from '../../src/http/admin-operations.ts';
import type { merchantDetailView } from '../../src/http/admin.ts';
import type { EventSummary } from '../../src/store/events.ts';
import type * as rows from '../../src/ui/rows.ts';

/** A value as the page receives it, sent as JSON: a Date is its ISO string. */
type Json<T> = T extends Date ? string : T extends readonly (infer U)[] ? Json<U>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;

/** Compiles only when the answer can be read as the row: every field the page reads is there, with its type. */
type Reads<Row, Answer extends Row> = [Row, Answer];

export type ConsoleRows = [
  Reads<rows.MerchantDetail, Json<ReturnType<typeof merchantDetailView>>>,
  Reads<rows.OrderDetail, Json<ReturnType<typeof orderDetailView>>>,
  Reads<rows.EventDetail, Json<ReturnType<typeof eventDetailView>>>,
  // GET /events answers the store's summaries as they are.
  Reads<rows.EventSummary, Json<EventSummary>>,
];
