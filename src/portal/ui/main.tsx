/**
 * The merchants' portal (docs/portal.md): sign-in (with the TOTP code when the user turned it
 * on), an invitation's acceptance, then one page per fragment route (`#/orders/ord_...`). What the
 * user's role does not allow is left out of the pages; the server refuses it anyway.
 */
import { useState } from 'preact/hooks';
import { ApiError, configureApi, post } from '../../ui/api.ts';
import { type NavItem, SessionApp, Shell, startPage, useRoute } from '../../ui/app.tsx';
import { ErrorNote, Field, LanguageSwitch, formValues, useAction } from '../../ui/components.tsx';
import { setupLanguage, t } from '../../ui/i18n.ts';
import { AccountPage } from './pages/account.tsx';
import { AppsPage } from './pages/apps.tsx';
import { AuditPage } from './pages/audit.tsx';
import { EventPage, EventsPage } from './pages/events.tsx';
import { InvitationPage } from './pages/invitation.tsx';
import { OrderPage, OrdersPage, RefundsPage } from './pages/orders.tsx';
import { PlatformKeysPage } from './pages/platform-keys.tsx';
import { SettlementPage } from './pages/settlement.tsx';
import { StatementsPage } from './pages/statements.tsx';
import { UsersPage } from './pages/users.tsx';
import { roleLabel } from '../../ui/roles.ts';
import type { Session } from './session.ts';
import { PORTAL_ZH } from './zh.ts';

configureApi({ ownPrefix: '/portal/', base: '/portal/api', sessionPath: '/portal/api/session' });
setupLanguage(PORTAL_ZH);

const NAV: NavItem[] = [
  { href: '#/', label: () => t('Orders'), permission: 'orders.read' },
  { href: '#/refunds', label: () => t('Refunds'), permission: 'orders.read' },
  { href: '#/events', label: () => t('Events'), permission: 'events.read' },
  { href: '#/statements', label: () => t('Statements'), permission: 'statements.read' },
  { href: '#/settlement', label: () => t('Settlement accounts'), permission: 'settlement.read' },
  { href: '#/apps', label: () => t('Apps and keys'), permission: 'apps.read' },
  { href: '#/platform-keys', label: () => t('Platform keys'), permission: 'apps.read' },
  { href: '#/users', label: () => t('Users'), permission: 'users.manage' },
  { href: '#/audit', label: () => t('Audit log'), permission: 'audit.read' },
  { href: '#/account', label: () => t('My account'), permission: null },
];

function Page({ route }: { route: string[] }) {
  const [first, id] = route;
  switch (first) {
    case undefined:
    case 'orders':
      return id ? <OrderPage orderId={id} /> : <OrdersPage />;
    case 'refunds':
      return <RefundsPage />;
    case 'events':
      return id ? <EventPage eventId={id} /> : <EventsPage />;
    case 'statements':
      return <StatementsPage />;
    case 'settlement':
      return <SettlementPage />;
    case 'apps':
      return <AppsPage />;
    case 'platform-keys':
      return <PlatformKeysPage />;
    case 'users':
      return <UsersPage />;
    case 'audit':
      return <AuditPage />;
    case 'account':
      return <AccountPage />;
    case 'password-set':
      return <OrdersPage />;
    default:
      return <p class="note error">{t('There is no page {page}.', { page: window.location.hash })}</p>;
  }
}

function SignIn({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const action = useAction();
  const [needCode, setNeedCode] = useState(false);
  // Where an accepted invitation leads: the note that the password is set, the login filled in.
  const route = useRoute();
  const passwordSetFor = route[0] === 'password-set' ? (route[1] ?? '') : null;
  return (
    <main class="sign-in">
      <form
        class="card"
        aria-label={t('Sign in')}
        onSubmit={(e) => {
          const v = formValues(e);
          void action.run(async () => {
            try {
              const session = await post<Session>('/portal/api/session', {
                login: v.login,
                password: v.password,
                ...(needCode ? { totpCode: v.totpCode ?? '' } : {}),
              });
              if (passwordSetFor !== null) window.location.hash = '#/';
              onSignedIn(session);
            } catch (err) {
              if (err instanceof ApiError && err.code === 'PORTAL_TOTP_REQUIRED') {
                setNeedCode(true);
                return;
              }
              throw err;
            }
          });
        }}
      >
        <h1>{t('Merchant portal')}</h1>
        <p class="muted">{t('Merchant Payment Service')}</p>
        {passwordSetFor !== null ? (
          <p class="note ok" role="status">
            {t('Your password is set: sign in.')}
          </p>
        ) : null}
        <Field label={t('Login')}>
          <input name="login" autocomplete="username" required autoFocus={passwordSetFor === null} defaultValue={passwordSetFor ?? ''} />
        </Field>
        <Field label={t('Password')}>
          <input name="password" type="password" autocomplete="current-password" required autoFocus={passwordSetFor !== null} />
        </Field>
        {needCode ? (
          <Field label={t('Code from your authenticator app')}>
            <input name="totpCode" inputMode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required autoFocus />
          </Field>
        ) : null}
        <button type="submit" class="primary" disabled={action.busy}>
          {t('Sign in')}
        </button>
        <ErrorNote error={action.error} />
        <LanguageSwitch />
      </form>
    </main>
  );
}

function PortalShell({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  return (
    <Shell
      session={session}
      brand={session.merchant.name}
      who={
        <span class="who" data-user={session.user.login}>
          {session.user.login} · {roleLabel(session.user.role)}
        </span>
      }
      nav={NAV}
      active={`#/${route[0] === 'orders' ? '' : (route[0] ?? '')}`}
      onSignOut={onSignOut}
    >
      <Page route={route} />
    </Shell>
  );
}

function Portal() {
  const route = useRoute();
  // An invitation link is opened without a session.
  if (route[0] === 'invitation' && route[1]) return <InvitationPage token={route[1]} />;
  return (
    <SessionApp<Session>
      sessionPath="/portal/api/session"
      boot={t('Loading…')}
      signIn={(onSignedIn) => <SignIn onSignedIn={onSignedIn} />}
      shell={(session, onSignOut) => <PortalShell session={session} onSignOut={onSignOut} />}
    />
  );
}

startPage(<Portal />);
