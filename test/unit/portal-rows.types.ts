/**
 * The portal's rows (src/portal/ui/rows.ts, the session of src/portal/ui/session.ts, the users of
 * src/ui/rows.ts) checked against the functions that write the portal API's answers
 * (src/portal/answers.ts and the views it shares with the back office): `npm run typecheck` fails
 * when an answer no longer carries a field a page reads, or carries it with another type. The
 * portal API has no published schema; these functions are what it serves (sent as JSON, so a Date
 * is read as its string). Its open-API shapes (statements, platform keys) are generated instead.
 */
import type { userView } from '../../src/backoffice-http/merchant-user-views.ts';
import type * as answers from '../../src/portal/answers.ts';
import type * as rows from '../../src/portal/ui/rows.ts';
import type { Session } from '../../src/portal/ui/session.ts';
import type { User } from '../../src/ui/rows.ts';
import type { invitationUser } from '../../src/usecases/merchant-users.ts';

/** A value as the page receives it, sent as JSON: a Date is its ISO string. */
type Json<T> = T extends Date ? string : T extends readonly (infer U)[] ? Json<U>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;

/** Compiles only when the answer can be read as the row: every field the page reads is there, with its type. */
type Reads<Row, Answer extends Row> = [Row, Answer];

/** What a view answers, as JSON. */
type Answer<F extends (...args: never[]) => unknown> = Json<Awaited<ReturnType<F>>>;

export type PortalRows = [
  Reads<Session, Answer<typeof answers.sessionView>>,
  Reads<rows.Invitation, Answer<typeof invitationUser>>,
  Reads<rows.OrdersPage, Answer<typeof answers.ordersPageView>>,
  Reads<rows.OrderDetail, Answer<typeof answers.orderDetailView>>,
  Reads<{ refunds: rows.Refund[] }, Answer<typeof answers.refundsView>>,
  Reads<{ events: rows.EventSummary[] }, Answer<typeof answers.eventsView>>,
  Reads<rows.EventDetail, Answer<typeof answers.eventDetailView>>,
  // GET /apps lists what GET /apps/:appId answers.
  Reads<{ apps: rows.App[] }, { apps: Answer<typeof answers.appWithKeysView>[] }>,
  Reads<rows.Settlement, Answer<typeof answers.settlementView>>,
  Reads<rows.AuditPage, Answer<typeof answers.auditPageView>>,
  Reads<{ users: User[] }, { users: Answer<typeof userView>[] }>,
];
