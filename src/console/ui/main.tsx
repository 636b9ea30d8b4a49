/**
 * The operators' console: sign-in, then one page per fragment route (`#/orders/ord_...`). What the
 * operator's role does not allow is left out of the pages; the server refuses it anyway.
 */
import { useState } from 'preact/hooks';
import { post } from '../../ui/api.ts';
import { startApp, useRoute } from '../../ui/app.tsx';
import type { Session } from './session.ts';
import { ErrorNote, Field, LanguageSwitch, SessionContext, formValues, useAction } from '../../ui/components.tsx';
import { ZONE, ZONE_LABEL } from '../../ui/format.ts';
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

const NAV: { href: string; label: () => string; permission: string }[] = [
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

function Shell({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  const [menu, setMenu] = useState(false);
  const active = `#/${route[0] ?? ''}`;
  return (
    <SessionContext.Provider value={session}>
      <div class="shell">
        <header class="top">
          <button type="button" class="menu-toggle" aria-expanded={menu} onClick={() => setMenu(!menu)}>
            {t('Menu')}
          </button>
          <strong class="brand">{t('Operator console')}</strong>
          <span class="zone" title={ZONE}>
            {t('Times: {zone} ({label})', { zone: ZONE, label: ZONE_LABEL })}
          </span>
          <span class="who" data-operator={session.operator.name}>
            {session.operator.name} · {session.operator.role}
          </span>
          <LanguageSwitch />
          <button type="button" onClick={onSignOut}>
            {t('Sign out')}
          </button>
        </header>
        <nav class={menu ? 'side open' : 'side'} aria-label={t('Pages')} onClick={() => setMenu(false)}>
          {NAV.filter((n) => session.permissions.includes(n.permission)).map((n) => (
            <a key={n.href} href={n.href} aria-current={n.href === active || (n.href === '#/' && active === '#/') ? 'page' : undefined}>
              {n.label()}
            </a>
          ))}
        </nav>
        <main class="content">
          <Page route={route} />
        </main>
      </div>
    </SessionContext.Provider>
  );
}

startApp<Session>({
  sessionPath: '/console/api/session',
  boot: t('Loading the console…'),
  signIn: (onSignedIn) => <SignIn onSignedIn={onSignedIn} />,
  shell: (session, onSignOut) => <Shell session={session} onSignOut={onSignOut} />,
});
