/** My account: my password, and the second factor (TOTP with an authenticator app). */
import { useContext, useState } from 'preact/hooks';
import { post } from '../../../ui/api.ts';
import { ActionNote, Field, Section, SessionContext, formValues, useAction } from '../../../ui/components.tsx';
import { time } from '../../../ui/format.ts';
import { t } from '../../../ui/i18n.ts';
import { roleLabel } from '../../../ui/roles.ts';
import type { Session } from '../session.ts';

export function AccountPage() {
  const session = useContext(SessionContext) as Session;
  const password = useAction();
  const totp = useAction();
  const [setup, setSetup] = useState<{ secret: string; uri: string } | null>(null);
  const [enabled, setEnabled] = useState(session.user.totpEnabled);
  return (
    <>
      <h1>{t('My account')}</h1>
      <p>
        {t('Signed in as {login} ({role}) of {merchant} until {until} at the latest.', {
          login: session.user.login,
          role: roleLabel(session.user.role),
          merchant: session.merchant.name,
          until: time(session.expiresAt),
        })}
      </p>
      <Section title={t('Second factor (TOTP)')}>
        <ActionNote action={totp} />
        {enabled ? (
          <form
            class="inline-form"
            aria-label={t('Turn the second factor off')}
            onSubmit={(e) => {
              const v = formValues(e);
              void totp.run(async () => {
                await post('/totp/disable', { currentPassword: v.currentPassword });
                setEnabled(false);
              }, t('The second factor is off.'));
            }}
          >
            <p data-totp="on">{t('On: each sign-in asks for a code of your authenticator app.')}</p>
            <Field label={t('Current password')}>
              <input name="currentPassword" type="password" autocomplete="current-password" required />
            </Field>
            <button type="submit" class="danger" disabled={totp.busy}>
              {t('Turn off')}
            </button>
          </form>
        ) : setup === null ? (
          <>
            <p data-totp="off">{t('Off. With it on, a sign-in also asks for a code of an authenticator app.')}</p>
            <button type="button" disabled={totp.busy} onClick={() => void totp.run(async () => setSetup(await post('/totp')))}>
              {t('Set up')}
            </button>
          </>
        ) : (
          <form
            class="stack-form"
            aria-label={t('Confirm the second factor')}
            onSubmit={(e) => {
              const v = formValues(e);
              void totp.run(async () => {
                await post('/totp/confirm', { code: v.code });
                setEnabled(true);
                setSetup(null);
              }, t('The second factor is on.'));
            }}
          >
            <p>{t('Scan this code with your authenticator app, or enter the key by hand, then enter the code it shows.')}</p>
            <img class="qr" src="/portal/api/totp/qr.svg" alt={t('QR code of the key')} width={180} height={180} />
            <p>
              {t('Key')}: <code data-totp-secret={setup.secret}>{setup.secret}</code>
            </p>
            <Field label={t('Code')}>
              <input name="code" inputMode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required />
            </Field>
            <button type="submit" class="primary" disabled={totp.busy}>
              {t('Turn on')}
            </button>
          </form>
        )}
      </Section>
      <Section title={t('Change my password')}>
        <form
          class="stack-form"
          aria-label={t('Change my password')}
          onSubmit={(e) => {
            const v = formValues(e);
            void password.run(
              () => post('/password', { currentPassword: v.currentPassword, newPassword: v.newPassword }),
              t('Password changed; your other sessions have ended.'),
            );
          }}
        >
          <Field label={t('Current password')}>
            <input name="currentPassword" type="password" autocomplete="current-password" required />
          </Field>
          <Field label={t('New password')} hint={t('12 to 256 characters')}>
            <input name="newPassword" type="password" autocomplete="new-password" required minLength={12} maxLength={256} />
          </Field>
          <button type="submit" class="primary" disabled={password.busy}>
            {t('Change password')}
          </button>
          <ActionNote action={password} />
        </form>
      </Section>
    </>
  );
}
