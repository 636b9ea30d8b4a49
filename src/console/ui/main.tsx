/**
 * The operators' console: sign-in, then one page per fragment route (`#/orders/ord_...`). What the
 * operator's role does not allow is left out of the pages; the server refuses it anyway.
 */
import { post } from '../../ui/api.ts';
import { type NavItem, Shell, startApp, useRoute } from '../../ui/app.tsx';
import type { Session } from './session.ts';
import { ErrorNote, Field, LanguageSwitch, formValues, useAction } from '../../ui/components.tsx';
import { setupLanguage, t } from '../../ui/i18n.ts';
import { CONSOLE_ZH } from './zh.ts';
import { AccountPage } from './pages/account.tsx';
import { AuditPage } from './pages/audit.tsx';
import { DashboardPage } from './pages/dashboard.tsx';
import { EventPage, EventsPage } from './pages/events.tsx';
import { MerchantPage, MerchantsPage } from './pages/merchants.tsx';
import { OperatorsPage } from './pages/operators.tsx';
import { OrderPage, OrdersPage } from './pages/orders.tsx';
import { PlatformPage } from './pages/platform.tsx';
import { ReconciliationPage, ReconciliationRunPage } from './pages/reconciliation.tsx';
import { RefundsPage } from './pages/refunds.tsx';

setupLanguage(CONSOLE_ZH);

const NAV: NavItem[] = [
  { href: '#/', label: () => t('Dashboard'), permission: 'read' },
  { href: '#/merchants', label: () => t('Merchants'), permission: 'read' },
  { href: '#/orders', label: () => t('Orders'), permission: 'read' },
  { href: '#/refunds', label: () => t('Refunds'), permission: 'read' },
  { href: '#/events', label: () => t('Events'), permission: 'read' },
  { href: '#/reconciliation', label: () => t('Reconciliation'), permission: 'read' },
  { href: '#/platform', label: () => t('Platform'), permission: 'read' },
  { href: '#/operators', label: () => t('Operators'), permission: 'operators.manage' },
  { href: '#/audit', label: () => t('Audit log'), permission: 'audit.read' },
  { href: '#/account', label: () => t('My account'), permission: 'read' },
];

function Page({ route }: { route: string[] }) {
  const [first, id] = route;
  switch (first) {
    case undefined:
      return <DashboardPage />;
    case 'merchants':
      return id ? <MerchantPage merchantId={id} /> : <MerchantsPage />;
    case 'orders':
      return id ? <OrderPage orderId={id} /> : <OrdersPage />;
    case 'refunds':
      return <RefundsPage />;
    case 'events':
      return id ? <EventPage eventId={id} /> : <EventsPage />;
    case 'reconciliation':
      return id ? <ReconciliationRunPage runId={id} /> : <ReconciliationPage />;
    case 'platform':
      return <PlatformPage />;
    case 'operators':
      return <OperatorsPage />;
    case 'audit':
      return <AuditPage />;
    case 'account':
      return <AccountPage />;
    default:
      return <p class="note error">{t('There is no page {page}.', { page: window.location.hash })}</p>;
  }
}

function SignIn({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const action = useAction();
  return (
    <main class="sign-in">
      <form
        class="card"
        aria-label={t('Sign in')}
        onSubmit={(e) => {
          const v = formValues(e);
          void action.run(async () => onSignedIn(await post<Session>('/console/api/session', { name: v.name, password: v.password })));
        }}
      >
        <h1>{t('Operator console')}</h1>
        <p class="muted">{t('Merchant Payment Service')}</p>
        <Field label={t('Name')}>
          <input name="name" autocomplete="username" required autoFocus />
        </Field>
        <Field label={t('Password')}>
          <input name="password" type="password" autocomplete="current-password" required />
        </Field>
        <button type="submit" class="primary" disabled={action.busy}>
          {t('Sign in')}
        </button>
        <ErrorNote error={action.error} />
        <LanguageSwitch />
      </form>
    </main>
  );
}

function ConsoleShell({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  return (
    <Shell
      session={session}
      brand={t('Operator console')}
      who={
        <span class="who" data-operator={session.operator.name}>
          {session.operator.name} · {session.operator.role}
        </span>
      }
      nav={NAV}
      active={`#/${route[0] ?? ''}`}
      onSignOut={onSignOut}
    >
      <Page route={route} />
    </Shell>
  );
}

startApp<Session>({
  sessionPath: '/console/api/session',
  boot: t('Loading the console…'),
  signIn: (onSignedIn) => <SignIn onSignedIn={onSignedIn} />,
  shell: (session, onSignOut) => <ConsoleShell session={session} onSignOut={onSignOut} />,
});
