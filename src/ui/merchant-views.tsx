/** A merchant's things as both surfaces show them: its settlement accounts, and the form that adds a public key to an app. */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { post } from './api.ts';
import type { Account } from './rows.ts';

export type { Account };
import { ActionNote, Field, Table, formValues, useAction } from './components.tsx';
import { money, time } from './format.ts';
import { t } from './i18n.ts';

/** Settlement accounts: the card's last four digits only. */
export function AccountsTable({ accounts }: { accounts: Account[] }) {
  return (
    <Table
      head={[t('Account id'), t('Entity'), t('Merchant no.'), t('Card'), t('Agreed ceiling'), t('Created')]}
      empty={accounts.length === 0}
    >
      {accounts.map((a) => (
        <tr key={a.accountId}>
          <td class="mono">{a.accountId}</td>
          <td>
            {a.entityName} ({a.entityType})
          </td>
          <td class="mono">{a.merchantNo}</td>
          <td class="mono">•••• {a.cardLast4}</td>
          <td>{a.agreedCeilingFen === null ? '—' : money(a.agreedCeilingFen)}</td>
          <td class="when">{time(a.createdAt)}</td>
        </tr>
      ))}
    </Table>
  );
}

/**
 * Adds a public key to an app (POST `{path}` `{keyId, publicKeyPem}`): the PEM pasted or read from
 * a file; the server checks it (RSA, 2048 to 4096 bits, never a private key).
 */
export function PublicKeyForm(o: {
  path: string;
  label: string;
  title: string;
  submit: string;
  done: string;
  intro?: ComponentChildren;
  onAdded: () => void;
}) {
  const upload = useAction();
  const [pem, setPem] = useState('');
  return (
    <form
      class="stack-form"
      aria-label={o.label}
      onSubmit={(e) => {
        const v = formValues(e);
        void upload.run(async () => {
          await post(o.path, { keyId: v.keyId, publicKeyPem: pem });
          setPem('');
          o.onAdded();
        }, o.done);
      }}
    >
      <h4>{o.title}</h4>
      {o.intro}
      <Field label={t('Key id')}>
        <input name="keyId" required maxLength={128} />
      </Field>
      <Field label={t('PEM file')}>
        <input
          type="file"
          accept=".pem,.pub,.txt"
          onChange={(e) => {
            const f = (e.currentTarget as HTMLInputElement).files?.[0];
            if (f) void f.text().then(setPem);
          }}
        />
      </Field>
      <Field label={t('Public key (PEM)')} hint={t('-----BEGIN PUBLIC KEY----- … RSA, 2048 to 4096 bits; never the private key')}>
        <textarea
          name="publicKeyPem"
          rows={5}
          value={pem}
          onInput={(e) => setPem((e.currentTarget as HTMLTextAreaElement).value)}
          required
        />
      </Field>
      <button type="submit" class="primary" disabled={upload.busy}>
        {o.submit}
      </button>
      <ActionNote action={upload} />
    </form>
  );
}
