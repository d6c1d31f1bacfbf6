//! gRPC codecs that decode requests with prost and write responses straight from the
//! cache's shared bytes (see `xdst_core::wire`). Buffers start small: an idle stream
//! should cost as little as possible.

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{BufMut, Bytes};
use futures::StreamExt;
use futures::stream::BoxStream;
use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use xdst_core::delta::DeltaResponse;
use xdst_core::sotw::SotwResponse;
use xdst_core::wire;

/// Initial per-stream buffer size; buffers grow for large messages.
const BUFFER: usize = 512;
/// Flush the encode buffer to the socket past this many bytes.
const YIELD: usize = 32 * 1024;

/// Something the server writes.
pub trait Outgoing: Send + 'static {
    fn encoded_len(&self) -> usize;
    fn encode(&self, buf: &mut impl BufMut);
}

impl Outgoing for SotwResponse {
    fn encoded_len(&self) -> usize {
        wire::sotw_len(self)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        wire::encode_sotw(self, buf)
    }
}

impl Outgoing for DeltaResponse {
    fn encoded_len(&self) -> usize {
        wire::delta_len(self)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        wire::encode_delta(self, buf)
    }
}

/// A server stream's response body: each message framed in an allocation of its own, sized
/// exactly and freed once written, then the stream's status as trailers. tonic's encoder
/// copies every message of a stream into one buffer that then keeps the size of the largest
/// message for as long as the stream lives: with large configurations that is most of an
/// idle stream's memory (250 KB each at 1,000 routes and 1,000 Services; docs/PERFORMANCE.md,
/// "Where the memory goes at scale").
///
/// Under `--max-unread-bytes-per-client` ([`crate::unread`]) a message is handed out in
/// pieces, one in flight at a time, once its client's budget has room for it; a stream reset
/// for not reading ends with RST_STREAM ENHANCE_YOUR_CALM.
pub struct ResponseBody<Resp> {
    body: Body<Resp>,
}

enum Body<Resp> {
    Whole(Option<BoxStream<'static, Result<Resp, Status>>>),
    /// In place: tonic boxes the body, and a second box would be one more cache line to fetch
    /// for every response of every stream.
    Budgeted(Outbox<Resp>),
}

/// A budgeted body's state between frames: polled by hand, as the whole body is, so that a
/// response costs the budget a few atomic operations and no wake of its own. With an `async`
/// body per frame that waited for each piece to be written before it waited for the next
/// message, the budget was about a sixth of xdst's CPU in a change to 100,000 streams; polled
/// by hand, 5-7 % of xdst's CPU came back (docs/PERFORMANCE.md, issue 51).
struct Outbox<Resp> {
    messages: BoxStream<'static, Result<Resp, Status>>,
    stream: Arc<crate::unread::Stream>,
    /// Where a stream reset for not reading is counted.
    refusals: Arc<dyn crate::unread::Refusals>,
    /// The response being handed out.
    pieces: Option<crate::unread::Pieces>,
    /// Responses waiting for room under their client's budget.
    room: Option<Room<Resp>>,
    /// How the stream ends, once what was framed with the last messages is handed out.
    ending: Option<Box<Status>>,
    done: bool,
}

impl<Resp: Outgoing> ResponseBody<Resp> {
    /// `unread`: the stream's share of its client's budget, and the serving plane that counts
    /// a reset; None without a limit.
    pub fn new(
        messages: BoxStream<'static, Result<Resp, Status>>,
        unread: Option<(Arc<crate::unread::Stream>, Arc<dyn crate::unread::Refusals>)>,
    ) -> Self {
        let body = match unread {
            None => Body::Whole(Some(messages)),
            Some((stream, refusals)) => Body::Budgeted(Outbox {
                messages,
                stream,
                refusals,
                pieces: None,
                room: None,
                ending: None,
                done: false,
            }),
        };
        ResponseBody { body }
    }
}

type Polled = Poll<Option<Result<http_body::Frame<Bytes>, Status>>>;

impl<Resp: Outgoing> Outbox<Resp> {
    /// The next frame: a piece of the response being handed out, once the last one is
    /// written; else the next responses framed together, once the budget has room for them;
    /// else the trailers.
    ///
    /// Waiting for the next message does not wait for the last piece to be written (the
    /// transport writes it moments after taking it, and a wake for that alone would be one
    /// more wake of the stream per response); a reset meant for that piece still reaches it.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Polled {
        if self.done {
            return Poll::Ready(None);
        }
        // Polled: whatever this waits on, a reset reaches it.
        self.stream.set_parked(true);
        loop {
            if let Some(room) = &mut self.room {
                let (claim, messages) = match ready!(room.as_mut().poll(cx)) {
                    Ok(claimed) => claimed,
                    Err(reset) => return self.reset(reset),
                };
                self.room = None;
                let len = messages.iter().map(|m| 5 + m.encoded_len()).sum();
                self.pieces = Some(self.stream.pieces(frame_all(&messages, len), claim));
            }
            if let Some(pieces) = &mut self.pieces {
                if pieces.has_more() {
                    // One piece of a stream in flight at a time.
                    if let Err(reset) = ready!(self.stream.poll_piece_written(cx)) {
                        return self.reset(reset);
                    }
                    let piece = pieces.next_piece().expect("a piece is left");
                    self.stream.set_parked(false);
                    return Poll::Ready(Some(Ok(http_body::Frame::data(piece))));
                }
                self.pieces = None;
            }
            if self.stream.is_reset() {
                let max = self.stream.max();
                return self.reset(crate::unread::Reset { max });
            }
            if let Some(status) = self.ending.take() {
                return self.end(&status);
            }
            let message = match self.messages.poll_next_unpin(cx) {
                Poll::Pending => {
                    if self.stream.waits_for_piece()
                        && let Poll::Ready(reset) = self.stream.poll_reset(cx)
                    {
                        return self.reset(reset);
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Some(Ok(message))) => message,
                Poll::Ready(Some(Err(status))) => return self.end(&status),
                Poll::Ready(None) => return self.end(&Status::ok("")),
            };
            // Responses already waiting go out with it, up to a piece: a change that touches
            // every type is one write to the client, not one per type (and one wake-up of
            // each side).
            let mut len = 5 + message.encoded_len();
            let mut messages = vec![message];
            while len < crate::unread::PIECE && self.ending.is_none() {
                match self.messages.poll_next_unpin(cx) {
                    Poll::Ready(Some(Ok(m))) => {
                        len += 5 + m.encoded_len();
                        messages.push(m);
                    }
                    Poll::Ready(Some(Err(status))) => self.ending = Some(Box::new(status)),
                    Poll::Ready(None) => self.ending = Some(Box::new(Status::ok(""))),
                    Poll::Pending => break,
                }
            }
            match self.stream.try_claim(len) {
                Some(claim) => self.pieces = Some(self.stream.pieces(frame_all(&messages, len), claim)),
                None => self.room = Some(wait_for_room(self.stream.clone(), self.refusals.clone(), len, messages)),
            }
        }
    }

    /// Ends the stream with `status` as trailers.
    fn end(&mut self, status: &Status) -> Polled {
        self.done = true;
        Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers(status)))))
    }

    /// Ends the stream with RST_STREAM ENHANCE_YOUR_CALM (gRPC clients report
    /// RESOURCE_EXHAUSTED): a client that does not read would never see trailers, and the reset
    /// frees what was queued for it.
    fn reset(&mut self, reset: crate::unread::Reset) -> Polled {
        self.done = true;
        self.pieces = None;
        self.room = None;
        let mut status = Status::resource_exhausted(format!(
            "this stream's responses were not read while its client had more unread than \
             --max-unread-bytes-per-client allows ({} bytes)",
            reset.max
        ));
        status.set_source(Arc::new(h2::Error::from(h2::Reason::ENHANCE_YOUR_CALM)));
        Poll::Ready(Some(Err(status)))
    }
}

/// A wait for room, and what it was for.
type Room<Resp> = Pin<Box<dyn Future<Output = Result<(crate::unread::Claim, Vec<Resp>), crate::unread::Reset>> + Send>>;

/// Waits for room for `message` under its client's budget ([`crate::unread::Stream::claim`]),
/// boxed, with the message moved in: the body, which lives as long as the stream, keeps only
/// a pointer for this wait.
fn wait_for_room<Resp: Outgoing>(
    stream: Arc<crate::unread::Stream>,
    refusals: Arc<dyn crate::unread::Refusals>,
    len: usize,
    message: Vec<Resp>,
) -> Room<Resp> {
    Box::pin(async move {
        let refused = |client: &str| refusals.unread_reset(client);
        stream.claim(len, &refused).await.map(|claim| (claim, message))
    })
}

/// A gRPC message frame: the uncompressed flag, the length, the message.
pub fn frame(message: &impl Outgoing) -> Bytes {
    Bytes::from(frame_vec(message))
}

/// Bytes of responses framed since the server started: [`crate::memory`] hands freed memory
/// back after a burst of them.
pub static FRAMED_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn frame_vec(message: &impl Outgoing) -> Vec<u8> {
    frame_all(std::slice::from_ref(message), 5 + message.encoded_len())
}

/// `messages` framed one after the other, `len` bytes in all.
fn frame_all(messages: &[impl Outgoing], len: usize) -> Vec<u8> {
    FRAMED_BYTES.fetch_add(len as u64, std::sync::atomic::Ordering::Relaxed);
    let mut buf = Vec::with_capacity(len);
    for message in messages {
        buf.push(0);
        buf.extend_from_slice(&u32::try_from(message.encoded_len()).unwrap_or(u32::MAX).to_be_bytes());
        message.encode(&mut buf);
    }
    debug_assert_eq!(buf.len(), len);
    buf
}

/// The trailers that end a stream with `status`.
fn trailers(status: &Status) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        // Only a message that is no header value fails; the code alone still says it.
        headers.insert(Status::GRPC_STATUS, http::HeaderValue::from(status.code() as i32));
    }
    headers
}

impl<Resp: Outgoing> http_body::Body for ResponseBody<Resp> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        match &mut self.get_mut().body {
            Body::Whole(slot) => {
                let Some(messages) = slot.as_mut() else { return Poll::Ready(None) };
                let frame = match ready!(messages.poll_next_unpin(cx)) {
                    Some(Ok(message)) => http_body::Frame::data(frame(&message)),
                    Some(Err(status)) => {
                        *slot = None;
                        http_body::Frame::trailers(trailers(&status))
                    }
                    None => {
                        *slot = None;
                        http_body::Frame::trailers(trailers(&Status::ok("")))
                    }
                };
                Poll::Ready(Some(Ok(frame)))
            }
            Body::Budgeted(outbox) => outbox.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.body {
            Body::Whole(slot) => slot.is_none(),
            Body::Budgeted(outbox) => outbox.done,
        }
    }
}

/// Decodes `Req` with prost, encodes `Resp` from shared bytes.
pub struct XdsCodec<Req, Resp>(PhantomData<fn() -> (Req, Resp)>);

impl<Req, Resp> Default for XdsCodec<Req, Resp> {
    fn default() -> Self {
        XdsCodec(PhantomData)
    }
}

pub struct XdsEncoder<Resp>(PhantomData<fn() -> Resp>);
pub struct XdsDecoder<Req>(PhantomData<fn() -> Req>);

impl<Req> Default for XdsDecoder<Req> {
    fn default() -> Self {
        XdsDecoder(PhantomData)
    }
}

impl<Req, Resp> Codec for XdsCodec<Req, Resp>
where
    Req: Message + Default + Send + 'static,
    Resp: Outgoing,
{
    type Encode = Resp;
    type Decode = Req;
    type Encoder = XdsEncoder<Resp>;
    type Decoder = XdsDecoder<Req>;

    fn encoder(&mut self) -> Self::Encoder {
        XdsEncoder(PhantomData)
    }
    fn decoder(&mut self) -> Self::Decoder {
        XdsDecoder(PhantomData)
    }
}

impl<Resp: Outgoing> Encoder for XdsEncoder<Resp> {
    type Item = Resp;
    type Error = Status;

    fn encode(&mut self, item: Resp, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.encoded_len());
        item.encode(dst);
        Ok(())
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(BUFFER, YIELD)
    }
}

/// INVALID_ARGUMENT for a request that does not decode as a `Req`.
pub fn malformed<Req>(e: prost::DecodeError) -> Status {
    Status::invalid_argument(format!(
        "malformed {}: {e}",
        std::any::type_name::<Req>().rsplit("::").next().unwrap_or("request")
    ))
}

impl<Req: Message + Default> Decoder for XdsDecoder<Req> {
    type Item = Req;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Req>, Status> {
        Req::decode(src).map(Some).map_err(malformed::<Req>)
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(BUFFER, YIELD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unread::{Refusals, STALL, Unread};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    /// A message that is its bytes.
    struct Raw(Vec<u8>);

    impl Outgoing for Raw {
        fn encoded_len(&self) -> usize {
            self.0.len()
        }
        fn encode(&self, buf: &mut impl BufMut) {
            buf.put_slice(&self.0)
        }
    }

    struct Quiet;

    impl Refusals for Quiet {
        fn unread_reset(&self, _: &str) -> bool {
            false
        }
    }

    /// Counts its wakes.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    type Sender = futures::channel::mpsc::UnboundedSender<Result<Raw, Status>>;

    /// A budgeted body over the stream `client` of `unread`, fed by the returned sender.
    fn budgeted(unread: &Arc<Unread>, client: &str) -> (ResponseBody<Raw>, Sender) {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let stream = unread.stream(client, None).expect("a budget");
        (ResponseBody::new(Box::pin(rx), Some((stream, Arc::new(Quiet)))), tx)
    }

    fn poll(body: &mut ResponseBody<Raw>, wakes: &Arc<Wakes>) -> Polled {
        let waker = Waker::from(wakes.clone());
        http_body::Body::poll_frame(Pin::new(body), &mut Context::from_waker(&waker))
    }

    fn data(polled: Polled) -> Bytes {
        match polled {
            Poll::Ready(Some(Ok(frame))) => frame.into_data().expect("a data frame"),
            other => panic!("expected a data frame, got {:?}", other.map(|f| f.map(|f| f.map(|f| f.is_data())))),
        }
    }

    /// Issue 51: a body waiting for its next response is not woken when the transport writes
    /// its last piece (one wake fewer per response and stream); the next response still waits
    /// for that piece, one piece of a stream in flight at a time.
    #[test]
    fn a_piece_written_wakes_only_a_body_waiting_to_hand_out_the_next() {
        let unread = Unread::new(1 << 20);
        let (mut body, tx) = budgeted(&unread, "c");
        let wakes = Arc::new(Wakes::default());
        tx.unbounded_send(Ok(Raw(vec![7; 100]))).unwrap();
        let piece = data(poll(&mut body, &wakes));
        assert_eq!(piece.len(), 105, "framed: flag, length, message");
        assert!(poll(&mut body, &wakes).is_pending());
        drop(piece);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0, "the piece written woke a body waiting for a response");

        let piece = {
            tx.unbounded_send(Ok(Raw(vec![8; 10]))).unwrap();
            assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "the response wakes it");
            data(poll(&mut body, &wakes))
        };
        tx.unbounded_send(Ok(Raw(vec![9; 10]))).unwrap();
        assert!(poll(&mut body, &wakes).is_pending(), "handed out while the last piece is in flight");
        let before = wakes.0.load(Ordering::SeqCst);
        drop(piece);
        assert_eq!(wakes.0.load(Ordering::SeqCst), before + 1, "the piece written wakes the body waiting on it");
        assert_eq!(&data(poll(&mut body, &wakes))[5..], &[9; 10]);
    }

    /// A response larger than a piece goes out piece by piece, each once the last is written,
    /// and its claim on the budget ends with its last piece; one that fits a piece is handed
    /// out whole.
    #[test]
    fn a_large_response_goes_piece_by_piece_and_frees_its_budget_with_the_last() {
        use crate::unread::PIECE;
        let unread = Unread::new(1 << 20);
        let (mut body, tx) = budgeted(&unread, "c");
        let wakes = Arc::new(Wakes::default());
        tx.unbounded_send(Ok(Raw(vec![1; PIECE + 10]))).unwrap();
        let first = data(poll(&mut body, &wakes));
        assert_eq!(first.len(), PIECE);
        assert!(poll(&mut body, &wakes).is_pending(), "a second piece while the first is in flight");
        drop(first);
        let last = data(poll(&mut body, &wakes));
        assert_eq!(last.len(), 15);
        assert_eq!(unread.bytes("c"), PIECE + 15, "claimed until the last piece is written");
        drop(last);
        assert_eq!(unread.bytes("c"), 0);

        tx.unbounded_send(Ok(Raw(vec![2; 10]))).unwrap();
        let whole = data(poll(&mut body, &wakes));
        assert_eq!((whole.len(), unread.bytes("c")), (15, 15));
        drop(whole);
        assert_eq!(unread.bytes("c"), 0);
    }

    /// Issue 49, item 8b, after issue 51: a body waiting for its next response while its last
    /// piece is not written (its client does not read) is still reached by a reset when
    /// another stream of the client waits for room.
    #[tokio::test(start_paused = true)]
    async fn a_reset_reaches_a_body_waiting_for_its_next_response() {
        let unread = Unread::new(100);
        let (mut body, tx) = budgeted(&unread, "c");
        let wakes = Arc::new(Wakes::default());
        tx.unbounded_send(Ok(Raw(vec![7; 75]))).unwrap();
        let _unwritten = data(poll(&mut body, &wakes));
        assert!(poll(&mut body, &wakes).is_pending());

        let other = unread.stream("c", None).unwrap();
        let waiting = tokio::spawn(async move { other.claim(50, &|_| false).await.map(drop) });
        tokio::time::sleep(STALL * 2).await;
        assert!(wakes.0.load(Ordering::SeqCst) > 0, "the reset did not wake the body");
        match poll(&mut body, &wakes) {
            Poll::Ready(Some(Err(status))) => assert_eq!(status.code(), tonic::Code::ResourceExhausted),
            other => panic!("expected the reset, got {:?}", other.map(|f| f.map(|f| f.is_ok()))),
        }
        waiting.abort();
    }
}
