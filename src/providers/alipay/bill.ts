/**
 * Alipay's trade bill (bill_type trade, 业务明细), read into statement lines (docs/providers-alipay.md,
 * "Statements").
 *
 * `alipay.data.dataservice.bill.downloadurl.query` gives an address, valid for 30 seconds, of a ZIP
 * archive holding two CSV files in GBK: `{pid}_{date}_业务明细.csv` (the rows) and
 * `{pid}_{date}_业务明细(汇总).csv` (totals). The detail file: comment lines starting with `#`
 * (title, account, period, a dashed start marker), a header of column names, one row per trade paid
 * (业务类型 交易) and per refund (退款, its amount negative, the refund's out_request_no in
 * 退款批次号/请求号), then `#` lines again (an end marker, totals, export time). Values may carry
 * trailing tabs (written so that a spreadsheet keeps long numbers as text). Columns are found by name.
 */
import { zipEntries, zipEntryData } from '../../lib/zip.ts';
import { textLines } from '../../lib/lines.ts';
import type { ProviderStatementLine } from '../provider.ts';
import { beijingTime, billFen, columnsOf, malformed } from '../statement-parsing.ts';

const P = 'alipay';
const REQUIRED = ['支付宝交易号', '商户订单号', '业务类型', '完成时间', '订单金额（元）'] as const;
const OPTIONAL = ['退款批次号/请求号'] as const;
type Column = (typeof REQUIRED)[number] | (typeof OPTIONAL)[number];

/** A CSV row: comma-separated, a field in double quotes may hold commas and doubled quotes. */
export function csvFields(line: string): string[] {
  const out: string[] = [];
  let i = 0;
  for (;;) {
    let value = '';
    if (line[i] === '"') {
      i++;
      for (;;) {
        const q = line.indexOf('"', i);
        if (q === -1) throw malformed(P, 'an unterminated quoted field');
        value += line.slice(i, q);
        if (line[q + 1] === '"') {
          value += '"';
          i = q + 2;
        } else {
          i = q + 1;
          break;
        }
      }
      const comma = line.indexOf(',', i);
      value += comma === -1 ? line.slice(i) : line.slice(i, comma);
      i = comma === -1 ? line.length : comma;
    } else {
      const comma = line.indexOf(',', i);
      value = comma === -1 ? line.slice(i) : line.slice(i, comma);
      i = comma === -1 ? line.length : comma;
    }
    out.push(value.trim());
    if (i >= line.length) return out;
    i++; // the comma
  }
}

/** The detail file's lines, from the archive (found by its name's ending, in GBK or UTF-8). */
export function alipayBillLines(zip: Buffer): AsyncIterable<string> {
  const gbk = new TextDecoder('gbk');
  const entry = zipEntries(zip).find((e) => {
    const name = e.utf8Name ? e.name.toString('utf8') : gbk.decode(e.name);
    return name.endsWith('业务明细.csv') && !name.includes('汇总');
  });
  if (!entry) throw malformed(P, 'the archive has no 业务明细 file');
  return textLines(zipEntryData(zip, entry), 'gbk');
}

/** The statement lines of the detail file, row by row. */
export async function* parseAlipayTradeBill(lines: AsyncIterable<string>): AsyncGenerator<ProviderStatementLine> {
  let columns: Record<Column, number> | null = null;
  for await (const line of lines) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      // Comments before the header; after the rows, the end marker and the totals.
      if (columns !== null) return;
      continue;
    }
    if (columns === null) {
      columns = columnsOf<Column>(P, csvFields(line), REQUIRED, OPTIONAL);
      continue;
    }
    const f = csvFields(line);
    const col = (name: Column): string => (columns![name] === -1 ? '' : (f[columns![name]] ?? ''));
    const type = col('业务类型');
    const at = beijingTime(col('完成时间'));
    if (at === null) throw malformed(P, `a row's 完成时间 is not a time: ${JSON.stringify(col('完成时间'))}`);
    const amountFen = billFen(P, col('订单金额（元）'));
    if (type === '退款') {
      yield {
        kind: 'REFUND',
        // A refund made without out_request_no has the trade's out_trade_no as its request number.
        subjectId: col('退款批次号/请求号') || col('商户订单号'),
        providerRef: col('支付宝交易号') || null,
        amountFen,
        state: 'SUCCEEDED',
        at,
      };
    } else {
      yield {
        kind: 'PAYMENT',
        subjectId: col('商户订单号'),
        providerRef: col('支付宝交易号') || null,
        amountFen,
        state: type === '交易' ? 'PAID' : type,
        at,
      };
    }
  }
}
